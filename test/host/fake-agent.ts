import type { Agent, ChatOptions, ChatResult } from "../../src/agent/agent-types.js";
import { ChatCancelledError } from "../../src/agent/chat-errors.js";
import type { Message } from "../../src/llm/types.js";
import { createUsage, emptyUsage } from "../../src/llm/types.js";

/** One chat the fake agent received, with a handle to finish it. */
export interface FakeChat {
  text: string;
  depth: number | undefined;
  signal: AbortSignal | undefined;
  resolve(result?: string): void;
  reject(error: unknown): void;
  /** Settles when the chat's promise settles (after a cancellation too). */
  settled: Promise<void>;
}

/**
 * An {@link Agent} for host tests. By default each chat answers `echo: <text>` at once; with
 * `isManual` the test finishes chats itself through {@link chats}. Records whether two operations
 * ever overlapped (the session actor must prevent that).
 */
export class FakeAgent implements Agent {
  readonly name: string;
  readonly session: string;
  readonly chats: FakeChat[] = [];
  messages: Message[] = [];
  tokenUsed = 0;
  contextRatio = 0;
  compactCalls: (string | undefined)[] = [];
  resetCalls = 0;
  overlapped = false;
  /** Chats reported as cancelled before they ran (see Agent.reportCancelledChat). */
  cancelledChats: { text: string; reason: string }[] = [];
  /** What `compact` does: resolve with this, or throw it when it is an Error. */
  compactResult: boolean | Error = true;
  /** Called at the start of each compaction (e.g. to hold it open). */
  onCompact: (() => Promise<void>) | undefined;
  isManual: boolean;
  /** What `hasPendingApproval` says (a chat parked awaiting a tool approval). */
  hasPendingApproval = false;
  /** What the agent says its messages hold in memory (see Agent.memoryBytes). */
  memoryBytes = 0;
  /** Added to {@link memoryBytes} by each chat that completes (its messages). */
  bytesPerChat = 0;
  /** False: an aborted chat keeps running until the test rejects it (a slow wind-down). */
  cancelsAtOnce: boolean;
  #busy = 0;

  constructor(
    options: { name?: string; session?: string; isManual?: boolean; cancelsAtOnce?: boolean } = {},
  ) {
    this.name = options.name ?? "bot";
    this.session = options.session ?? "s1";
    this.isManual = options.isManual ?? false;
    this.cancelsAtOnce = options.cancelsAtOnce ?? true;
  }

  chat(text: string, options: ChatOptions = {}): Promise<ChatResult> {
    this.#enter();
    let resolveChat!: (result: ChatResult) => void;
    let rejectChat!: (error: unknown) => void;
    const promise = new Promise<ChatResult>((resolve, reject) => {
      resolveChat = resolve;
      rejectChat = reject;
    });
    const settled = promise.then(
      () => this.#leave(),
      () => this.#leave(),
    );
    const chat: FakeChat = {
      text,
      depth: options.depth,
      signal: options.signal,
      resolve: (result = `echo: ${text}`) => {
        this.messages.push({ role: "user", content: text }, { role: "assistant", content: result });
        this.memoryBytes += this.bytesPerChat;
        resolveChat({ result, usage: createUsage(3, 2) });
      },
      reject: rejectChat,
      settled,
    };
    this.chats.push(chat);
    if (this.cancelsAtOnce) {
      options.signal?.addEventListener("abort", () => rejectChat(new ChatCancelledError(emptyUsage())), {
        once: true,
      });
    }
    if (!this.isManual) chat.resolve();
    return promise;
  }

  async compact(topic?: string): Promise<boolean> {
    this.#enter();
    try {
      this.compactCalls.push(topic);
      await this.onCompact?.();
      if (this.compactResult instanceof Error) throw this.compactResult;
      return this.compactResult;
    } finally {
      this.#leave();
    }
  }

  reportCancelledChat(text: string, reason: string): void {
    this.cancelledChats.push({ text, reason });
  }

  async reset(): Promise<void> {
    this.#enter();
    this.resetCalls++;
    this.messages = [];
    this.#leave();
  }

  #enter(): void {
    if (this.#busy > 0) this.overlapped = true;
    this.#busy++;
  }

  #leave(): void {
    this.#busy--;
  }
}
