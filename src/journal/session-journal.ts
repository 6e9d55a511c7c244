import type { Message } from "../llm/types.js";
import {
  type AnsweredChat,
  type ChatJournal,
  type ChatProgress,
  type InFlightIteration,
  isEmptyEntry,
  type JournalEntry,
  type QueuedChat,
} from "./chat-journal.js";

/**
 * One session's journal: its entry in memory, written to the {@link ChatJournal} after every step.
 * Steps taken in one tick are written once (the write starts on the next microtask and writes the
 * entry as it is then); writes never overlap and happen in order. A failed write is retried with
 * the next step: the journal is best effort, the chat never fails because of it.
 */
export class SessionJournal {
  readonly #store: ChatJournal;
  readonly agent: string;
  readonly session: string;
  #entry: JournalEntry;
  /** The stored entry exists (so an empty one must be removed, not merely not written). */
  #isStored: boolean;
  #written: Promise<void> = Promise.resolve();
  #pending: Promise<void> | undefined;
  /** The batch in flight has been written (with a call's start) since its assistant turn. */
  #isBatchStored = false;

  private constructor(store: ChatJournal, agent: string, session: string, loaded: JournalEntry | undefined) {
    this.#store = store;
    this.agent = agent;
    this.session = session;
    this.#entry = loaded ?? { chat: null, queued: [] };
    this.#isStored = loaded !== undefined;
  }

  /** The session's journal, with what an earlier life of the session left unfinished. */
  static async open(store: ChatJournal, agent: string, session: string): Promise<SessionJournal> {
    const loaded = await store.load(agent, session).catch(() => undefined);
    return new SessionJournal(store, agent, session, loaded);
  }

  /** The chat that was running when the session's last host stopped, if any. */
  get unfinishedChat(): ChatProgress | null {
    return this.#entry.chat;
  }

  /** The chats that were queued, oldest first. */
  get queued(): readonly QueuedChat[] {
    return this.#entry.queued;
  }

  /** See {@link JournalEntry}'s `approvalRequired`. */
  get approvalRequired(): readonly string[] {
    return this.#entry.approvalRequired ?? [];
  }

  /**
   * Tools the session's callers need approval for; stored with the next step (a session with no
   * unfinished work has nothing to resume: its callers say it again with their next request).
   */
  requireApproval(toolNames: readonly string[]): void {
    const known = new Set(this.#entry.approvalRequired ?? []);
    if (toolNames.every((name) => known.has(name))) return;
    this.#entry.approvalRequired = [...new Set([...known, ...toolNames])].sort();
  }

  /** A chat starts: the history holds `chatStart` messages before it; `requestId` is the client's `id`. */
  beginChat(chatId: string, userText: string, chatStart: number, requestId?: string): void {
    this.#entry.chat = {
      chatId,
      userText,
      ...(requestId === undefined ? {} : { requestId }),
      chatStart,
      iteration: 0,
      messages: [],
      inFlight: null,
    };
    this.#write();
  }

  /** Goes on with a resumed chat, as far as it got (its messages so far, the iteration it is in). */
  continueChat(progress: ChatProgress): void {
    this.#entry.chat = progress;
    this.#write();
  }

  /**
   * A message of the running chat was produced (the onMessageRecorded stream): the user message,
   * an assistant turn, a tool result, a message a tool appended. An assistant turn closes the
   * previous iteration and opens the next.
   */
  record(message: Message): void {
    const chat = this.#entry.chat;
    if (chat === null) return;
    const inFlight = chat.inFlight;
    if (message.role === "assistant") {
      if (inFlight !== null) chat.messages.push(...settledIteration(inFlight));
      chat.inFlight = null;
      chat.iteration++;
      if (message.toolCalls?.length) {
        chat.inFlight = { assistant: message, started: [], results: {}, appended: [] };
        // Stored with the batch's first step (a call's start): until a call runs, a host that
        // dies only loses a model answer, which the resumed chat asks for again.
        this.#isBatchStored = false;
        return;
      }
      if (!isEmptyAssistant(message)) chat.messages.push(message);
    } else if (message.role === "tool" && inFlight !== null && message.toolCallId !== undefined) {
      inFlight.results[message.toolCallId] = message;
    } else if (inFlight !== null) {
      inFlight.appended.push(message);
    } else {
      chat.messages.push(message);
    }
    this.#write();
  }

  /**
   * A tool call is about to run: resolves once its start is stored, so a host that dies while it
   * runs leaves a record that it may have taken effect. An idempotent call is not marked (it is run
   * again anyway); it only makes sure its batch is stored, so the resumed chat runs it again.
   */
  toolStarting(callId: string, isIdempotent = false): Promise<void> {
    const inFlight = this.#entry.chat?.inFlight;
    if (inFlight === undefined || inFlight === null) return Promise.resolve();
    if (isIdempotent && this.#isBatchStored) return Promise.resolve();
    if (!isIdempotent) inFlight.started.push(callId);
    this.#isBatchStored = true;
    return this.#write();
  }

  /**
   * The chat ended (done, failed, cancelled, or parked with its approval): nothing to resume. With
   * its `answer` (done) and a client request id, the answer is kept until {@link forgetAnswer}.
   */
  endChat(answer?: Pick<AnsweredChat, "result" | "usage">): void {
    const chat = this.#entry.chat;
    if (chat === null) return;
    this.#entry.chat = null;
    if (answer !== undefined && chat.requestId !== undefined) {
      const answered = { requestId: chat.requestId, chatId: chat.chatId, ...answer };
      this.#entry.answered = [...(this.#entry.answered ?? []), answered];
    }
    this.#write();
  }

  /** Chats that ended with an answer whose reply is not stored yet (see {@link endChat}). */
  get answered(): readonly AnsweredChat[] {
    return this.#entry.answered ?? [];
  }

  /** The reply to the chat with this request id is stored: its answer need not be kept. */
  forgetAnswer(requestId: string): void {
    const answered = this.#entry.answered;
    if (!answered?.some((chat) => chat.requestId === requestId)) return;
    const left = answered.filter((chat) => chat.requestId !== requestId);
    if (left.length === 0) delete this.#entry.answered;
    else this.#entry.answered = left;
    this.#write();
  }

  /** A chat request entered the mailbox. */
  enqueue(queued: QueuedChat): void {
    this.#entry.queued.push(queued);
    this.#write();
  }

  /** Requests left the mailbox (taken to run, dropped, cancelled). */
  take(ids: readonly string[]): void {
    const before = this.#entry.queued.length;
    this.#entry.queued = this.#entry.queued.filter((queued) => !ids.includes(queued.id));
    if (this.#entry.queued.length !== before) this.#write();
  }

  /** Takes every queued request (they are about to be queued again, under new ids). */
  takeQueued(): QueuedChat[] {
    const queued = this.#entry.queued;
    if (queued.length === 0) return [];
    this.#entry.queued = [];
    this.#write();
    return queued;
  }

  /** Resolves once every step taken so far is stored (or failed to be). */
  flush(): Promise<void> {
    return this.#pending ?? this.#written;
  }

  #write(): Promise<void> {
    if (this.#pending !== undefined) return this.#pending;
    const pending = this.#written.then(async () => {
      this.#pending = undefined;
      const entry = this.#entry;
      if (isEmptyEntry(entry)) {
        if (!this.#isStored) return;
        await this.#store.remove(this.agent, this.session);
        this.#isStored = false;
      } else {
        await this.#store.save(this.agent, this.session, entry);
        this.#isStored = true;
      }
    });
    this.#pending = pending;
    this.#written = pending.catch(() => {});
    return this.#written;
  }
}

/** The messages of a finished iteration: the assistant turn, its results in call order, then what the tools appended. */
export function settledIteration(inFlight: InFlightIteration): Message[] {
  const results = (inFlight.assistant.toolCalls ?? []).flatMap((call) => {
    const result = inFlight.results[call.id];
    return result === undefined ? [] : [result];
  });
  return [inFlight.assistant, ...results, ...inFlight.appended];
}

/** An assistant turn with nothing in it (the chat leaves it out of the conversation). */
function isEmptyAssistant(message: Message): boolean {
  const content = message.content;
  return (
    (typeof content === "string" ? content.trim() === "" : content.length === 0) &&
    !message.thinkingBlocks?.length
  );
}
