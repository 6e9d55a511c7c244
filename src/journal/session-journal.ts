import { randomUUID } from "node:crypto";
import type { Message } from "../llm/types.js";
import type { ChatJournal } from "./chat-journal.js";
import {
  type AnsweredChat,
  type AskedChat,
  type ChatProgress,
  isEmptyEntry,
  type JournalEntry,
  type QueuedChat,
} from "./journal-entry.js";
import {
  applyStep,
  emptyEntry,
  foldJournal,
  type JournalRecord,
  type JournalStep,
} from "./journal-record.js";

export { settledIteration } from "./journal-record.js";

/** Records appended after the last snapshot before the next write folds them into one. */
const COMPACT_AFTER_RECORDS = 64;

/** A write of the session's records, kept until it is acknowledged (then retried in order). */
type JournalWrite =
  | { kind: "append"; record: JournalRecord }
  | { kind: "compact"; record: JournalRecord }
  | { kind: "remove" };

/**
 * One session's journal: its entry in memory, and the steps that changed it appended to the
 * {@link ChatJournal} as records. The steps of one tick become one record (the write starts on the
 * next microtask), so a tool step costs one append, not a rewrite of the whole entry. A chat that
 * ends with nothing left to do removes the session's records; one that ends with chats still
 * queued folds them into one snapshot record (so does every {@link COMPACT_AFTER_RECORDS}th
 * record, and the first write after a torn tail). Records are sent without waiting for the ones
 * before them (pipelined); a failed one is kept and sent again, with the same record id, with the
 * next step's: the journal is best effort, the chat never fails because of it.
 */
export class SessionJournal {
  readonly #store: ChatJournal;
  readonly agent: string;
  readonly session: string;
  readonly #entry: JournalEntry;
  /** Steps taken since the last record was formed. */
  #steps: JournalStep[] = [];
  /** Appends that failed, oldest first: sent again with the next write. */
  #failed: JournalRecord[] = [];
  /** A removal failed: it goes out again before the next write. */
  #isRemovalDue = false;
  /** The number of the last record formed (0: the session has none). */
  #lastN: number;
  /** Records stored since the last snapshot. */
  #sinceSnapshot = 0;
  /** The next record must be a snapshot (the stored records are torn, or could not be read). */
  #isSnapshotDue: boolean;
  /** The running chat ended since the last record was formed. */
  #hasChatEnded = false;
  /** Every write sent so far has settled. */
  #settled: Promise<void> = Promise.resolve();
  /** The compaction or removal in flight: writes formed after it wait for it. */
  #barrier: Promise<void> | undefined;
  /** This tick's write, formed on the next microtask. */
  #pending: Promise<void> | undefined;
  /** The batch in flight has been written (with a call's start) since its assistant turn. */
  #isBatchStored = false;

  private constructor(
    store: ChatJournal,
    agent: string,
    session: string,
    loaded: { entry: JournalEntry | undefined; lastN: number; isTorn: boolean },
  ) {
    this.#store = store;
    this.agent = agent;
    this.session = session;
    this.#entry = loaded.entry ?? emptyEntry();
    this.#lastN = loaded.lastN;
    this.#isSnapshotDue = loaded.isTorn;
  }

  /** The session's journal, with what an earlier life of the session left unfinished. */
  static async open(store: ChatJournal, agent: string, session: string): Promise<SessionJournal> {
    const loaded = await store.readRecords(agent, session).then(foldJournal, () => ({
      entry: undefined,
      // Unreadable now: the first record is a snapshot numbered above any stored one (a count of
      // milliseconds outgrows any session's record count), so it supersedes whatever is there.
      lastN: Date.now(),
      isTorn: true,
    }));
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
    this.#take({ kind: "approval", toolNames: [...new Set([...known, ...toolNames])].sort() });
  }

  /** A chat starts: the history holds `chatStart` messages before it; `requestId` is the client's `id`. */
  beginChat(chatId: string, userText: string, chatStart: number, requestId?: string): void {
    const chat: ChatProgress = {
      chatId,
      userText,
      ...(requestId === undefined ? {} : { requestId }),
      chatStart,
      iteration: 0,
      messages: [],
      inFlight: null,
    };
    // The step keeps the chat as it began; the entry gets its own copy, which later steps change.
    this.#take({ kind: "chat", chat }, { ...chat, messages: [] });
    this.#write();
  }

  /** Goes on with a resumed chat, as far as it got (its messages so far, the iteration it is in). */
  continueChat(progress: ChatProgress): void {
    this.#take({ kind: "chat", chat: structuredClone(progress) }, progress);
    this.#write();
  }

  /**
   * A message of the running chat was produced (the onMessageRecorded stream): the user message,
   * an assistant turn, a tool result, a message a tool appended. An assistant turn closes the
   * previous iteration and opens the next.
   */
  record(message: Message): void {
    if (this.#entry.chat === null) return;
    this.#take({ kind: "message", message });
    if (message.role === "assistant" && message.toolCalls?.length) {
      // Stored with the batch's first step (a call's start): until a call runs, a host that
      // dies only loses a model answer, which the resumed chat asks for again.
      this.#isBatchStored = false;
      return;
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
    if (!isIdempotent) this.#take({ kind: "started", callId });
    this.#isBatchStored = true;
    return this.#write();
  }

  /**
   * A call of the batch in flight is about to ask another agent's chat (`ask_agent`): resolves
   * once that is stored, so a host that dies while the call waits leaves a record of the chat to
   * stop when the call is resumed in doubt.
   */
  chatAsked(callId: string, chat: AskedChat): Promise<void> {
    if (!this.#entry.chat?.inFlight) return Promise.resolve();
    this.#take({ kind: "started", callId, asked: { agent: chat.agent, session: chat.session } });
    return this.#write();
  }

  /**
   * The chat ended (done, failed, cancelled, or parked with its approval): nothing to resume. With
   * its `answer` (done) and a client request id, the answer is kept until {@link forgetAnswer}.
   */
  endChat(answer?: Pick<AnsweredChat, "result" | "usage">): void {
    const chat = this.#entry.chat;
    if (chat === null) return;
    const answered =
      answer !== undefined && chat.requestId !== undefined
        ? { requestId: chat.requestId, chatId: chat.chatId, ...answer }
        : undefined;
    this.#take(answered === undefined ? { kind: "end" } : { kind: "end", answered });
    this.#hasChatEnded = true;
    this.#write();
  }

  /** Chats that ended with an answer whose reply is not stored yet (see {@link endChat}). */
  get answered(): readonly AnsweredChat[] {
    return this.#entry.answered ?? [];
  }

  /** The reply to the chat with this request id is stored: its answer need not be kept. */
  forgetAnswer(requestId: string): void {
    if (!this.#entry.answered?.some((chat) => chat.requestId === requestId)) return;
    this.#take({ kind: "forget", requestId });
    this.#write();
  }

  /** A chat request entered the mailbox. */
  enqueue(queued: QueuedChat): void {
    this.#take({ kind: "enqueue", queued });
    this.#write();
  }

  /** Requests left the mailbox (taken to run, dropped, cancelled). */
  take(ids: readonly string[]): void {
    if (!this.#entry.queued.some((queued) => ids.includes(queued.id))) return;
    this.#take({ kind: "take", ids: [...ids] });
    this.#write();
  }

  /** Takes every queued request (they are about to be queued again, under new ids). */
  takeQueued(): QueuedChat[] {
    const queued = this.#entry.queued;
    if (queued.length === 0) return [];
    this.#take({ kind: "take", ids: queued.map((chat) => chat.id) });
    this.#write();
    return queued;
  }

  /** Resolves once every step taken so far is stored (or failed to be). */
  flush(): Promise<void> {
    return this.#pending ?? this.#settled;
  }

  /** Applies a step to the entry (`chat` steps: `entryChat`, the entry's own copy) and keeps it for the next record. */
  #take(step: JournalStep, entryChat?: ChatProgress): void {
    applyStep(
      this.#entry,
      step.kind === "chat" && entryChat !== undefined ? { kind: "chat", chat: entryChat } : step,
    );
    this.#steps.push(step);
  }

  /**
   * Forms the steps of this tick into a write on the next microtask and sends it. Appends are
   * pipelined: each goes out at once, without waiting for the acknowledgements of those before it
   * (they are numbered, so the order they are read back in is theirs, and a missing one only tears
   * the tail until it is sent again). A compaction or a removal waits until every write before it
   * has settled, and the writes after it wait for it, since it drops the records before it.
   * Resolves once every write formed so far has settled.
   */
  #write(): Promise<void> {
    if (this.#pending !== undefined) return this.#pending;
    const pending = Promise.resolve().then(() => {
      this.#pending = undefined;
      for (const write of this.#form()) this.#dispatch(write);
      return this.#settled;
    });
    this.#pending = pending;
    return pending;
  }

  #dispatch(write: JournalWrite): void {
    const previous = this.#settled;
    if (write.kind === "append") {
      const send = () =>
        this.#store.append(this.agent, this.session, write.record).catch(() => {
          this.#failed.push(write.record);
        });
      const sent = this.#barrier === undefined ? send() : this.#barrier.then(send);
      this.#settled = Promise.all([previous, sent]).then(() => {});
      return;
    }
    const barrier = previous.then(() => {
      // What failed before is in this snapshot, or dropped with the records.
      this.#failed = [];
      return this.#send(write).catch(() => {
        // Sent again before the next step's write (a removal), or folded into the next record.
        if (write.kind === "remove") this.#isRemovalDue = true;
        else this.#isSnapshotDue = true;
      });
    });
    this.#barrier = barrier;
    this.#settled = barrier.then(() => {
      if (this.#barrier === barrier) this.#barrier = undefined;
    });
  }

  /** Turns the steps taken since the last write into the writes that store them. */
  #form(): JournalWrite[] {
    const writes: JournalWrite[] = [];
    if (this.#isRemovalDue) {
      this.#isRemovalDue = false;
      writes.push({ kind: "remove" });
    }
    const steps = this.#steps;
    if (steps.length === 0) {
      // Nothing new: appends that failed are sent again.
      const failed = this.#failed;
      this.#failed = [];
      return [...writes, ...failed.map((record): JournalWrite => ({ kind: "append", record }))];
    }
    this.#steps = [];
    const hasChatEnded = this.#hasChatEnded;
    this.#hasChatEnded = false;
    if (isEmptyEntry(this.#entry)) {
      // Nothing left to finish: every record goes, those not yet sent with them.
      if (this.#lastN > 0 && writes.length === 0) writes.push({ kind: "remove" });
      this.#lastN = 0;
      this.#sinceSnapshot = 0;
      this.#isSnapshotDue = false;
      return writes;
    }
    const n = ++this.#lastN;
    const isSnapshot =
      this.#isSnapshotDue ||
      this.#sinceSnapshot >= COMPACT_AFTER_RECORDS ||
      (hasChatEnded && this.#entry.queued.length > 0);
    if (isSnapshot) {
      writes.push({
        kind: "compact",
        record: { n, id: randomUUID(), snapshot: structuredClone(this.#entry), steps: [] },
      });
      this.#sinceSnapshot = 0;
      this.#isSnapshotDue = false;
      return writes;
    }
    const failed = this.#failed;
    this.#failed = [];
    this.#sinceSnapshot++;
    return [
      ...writes,
      ...failed.map((record): JournalWrite => ({ kind: "append", record })),
      { kind: "append", record: { n, id: randomUUID(), steps } },
    ];
  }

  #send(write: JournalWrite): Promise<void> {
    switch (write.kind) {
      case "append":
        return this.#store.append(this.agent, this.session, write.record);
      case "compact":
        return this.#store.compact(this.agent, this.session, write.record);
      case "remove":
        return this.#store.remove(this.agent, this.session);
    }
  }
}
