import type { Message } from "../llm/types.js";
import { Context } from "./context.js";
import type { ContextHistory } from "./context-history.js";

/** Runs a compaction on the given context and reports the new messages, or nothing on failure. */
export type Compactor = (
  context: Context,
  topic: string | undefined,
  signal: AbortSignal | undefined,
) => Promise<{ messages: Message[]; tokenUsed: number } | undefined>;

/**
 * Owns a session's {@link Context} against its token limit. Created by restoring the
 * history; compaction itself is the compaction machine, injected as a {@link Compactor}.
 */
export class ContextManager {
  readonly context: Context;
  readonly tokenLimit: number;
  readonly history: ContextHistory | undefined;
  readonly #compactor: Compactor;

  private constructor(
    context: Context,
    tokenLimit: number,
    history: ContextHistory | undefined,
    compactor: Compactor,
  ) {
    this.context = context;
    this.tokenLimit = tokenLimit;
    this.history = history;
    this.#compactor = compactor;
  }

  /** Restores the history (if any) into a fresh context. */
  static async create(params: {
    history?: ContextHistory;
    tokenLimit: number;
    compactor: Compactor;
  }): Promise<ContextManager> {
    const messages = params.history ? await params.history.restore() : [];
    return new ContextManager(new Context(messages), params.tokenLimit, params.history, params.compactor);
  }

  /** tokenUsed / tokenLimit. */
  get contextRatio(): number {
    return this.tokenLimit > 0 ? this.context.tokenUsed / this.tokenLimit : 0;
  }

  /**
   * Compacts on a fork; the context changes only when the compaction succeeded. An empty context
   * has nothing to summarise: that is a success that changes nothing (no request, no summary).
   */
  async compact(topic?: string, signal?: AbortSignal): Promise<boolean> {
    if (this.context.messages.length === 0) return true;
    const outcome = await this.#compactor(this.context.fork(), topic, signal);
    if (!outcome) return false;
    this.context.messages = outcome.messages;
    this.context.tokenUsed = outcome.tokenUsed;
    return true;
  }

  /** Empties the context and the history (`/new`). */
  async clear(): Promise<void> {
    this.context.clear();
    await this.history?.clear();
  }
}
