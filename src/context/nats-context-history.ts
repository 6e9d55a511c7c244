import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { z } from "zod";
import type { Message } from "../llm/types.js";
import type { ContextHistory } from "./context-history.js";
import { CorruptHistoryError, HistoryConflictError } from "./history-errors.js";
import { fromLastSnapshot, type HistoryRecord } from "./history-records.js";
import { JetStreamRecordLog, NotARecordError, type RecordLogContents } from "./jetstream-record-log.js";
import { PendingApproval } from "./pending-approval.js";
import { parseStoredMessage, storableMessages } from "./stored-message.js";

export interface NatsContextHistoryParams {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  /** `<prefix>.history.<agent>.<session>`; the marks use `<subject>.seq` and `<subject>.approval`. */
  subject: string;
  agent: string;
  session: string;
  maxPartBytes: () => number;
  /** Called before each write; throws when this host may no longer write the session. */
  fence?: () => void;
}

const StoredSeq = z.number().int().nonnegative();
/** How often a seq mark is retried against concurrent markers before giving up. */
const SEQ_MARK_ATTEMPTS = 5;

/**
 * How long what the opening read fetched may answer the other reads of a session's opening (they
 * follow it within a few round trips; later reads, and reads after a write, go to the server).
 */
const OPENING_READ_FRESH_MS = 5_000;

/** What the opening read fetched of the session's three subjects; each part answers one read. */
interface OpeningRead {
  messages: Promise<RecordLogContents> | undefined;
  seqMark: Promise<HistoryRecord | undefined> | undefined;
  approval: Promise<HistoryRecord | undefined> | undefined;
  /** `performance.now()` when it was sent. */
  sentAt: number;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/**
 * A session's history in a JetStream stream (see {@link NatsHistoryStore}), so any host on the
 * NATS system can take the session over. On the session's subject, each append is one record
 * (`append`: the messages as JSON; parts when over the max payload), a compaction is a `snapshot`
 * record followed by a purge of everything before it, and `restore` reads from the last complete
 * snapshot on. The seq mark and the pending approval are records on two subjects below it.
 *
 * Every write to the conversation expects the subject's last sequence to be the one this history
 * last read or wrote, so two writers never interleave silently: the second gets a
 * {@link HistoryConflictError} and writes nothing. This instance's own writes are serialised.
 */
export class NatsContextHistory implements ContextHistory {
  readonly agent: string;
  readonly session: string;
  readonly #messages: JetStreamRecordLog;
  readonly #fence: () => void;
  /** The conversation subject's last sequence as this writer knows it; undefined until read. */
  #lastSeq: number | undefined;
  /** The last of this instance's operations; undefined once it has settled and none followed. */
  #queue: Promise<unknown> | undefined;
  /** The opening read's parts not taken yet (see {@link #fromOpening}); undefined when none is left. */
  #opening: OpeningRead | undefined;
  /** Read or written already: the opening read is only ever the first operation. */
  #hasOpened = false;
  /**
   * The seq mark as this history last read or wrote it, with its subject's last sequence: the next
   * mark is written over it without reading it first (a mark moved since fails that write, which
   * then reads). Undefined until read.
   */
  #seqMark: { seq: number; subjectSeq: number } | undefined;

  constructor(params: NatsContextHistoryParams) {
    this.agent = params.agent;
    this.session = params.session;
    this.#messages = new JetStreamRecordLog({
      js: params.js,
      jsm: params.jsm,
      stream: params.stream,
      subject: params.subject,
      maxPartBytes: params.maxPartBytes,
    });
    this.#fence = params.fence ?? (() => {});
  }

  /**
   * The seq marks and the pending approval, on subjects below the conversation's. Made at each
   * use (rare: a session's start, a seq reservation, an approval) rather than held by every idle
   * session with its own target and subject.
   */
  get #seqMarks(): JetStreamRecordLog {
    return this.#messages.below("seq");
  }

  get #approvals(): JetStreamRecordLog {
    return this.#messages.below("approval");
  }

  /** The messages from the last snapshot on; also what later writes expect to follow. */
  restore(): Promise<Message[]> {
    const opened = this.#fromOpening("messages");
    return this.#serially(async () => {
      const { records, lastSeq } = await (opened ?? this.#read(this.#messages));
      this.#lastSeq = lastSeq;
      return fromLastSnapshot(records).flatMap((record) => this.#messagesOf(record));
    });
  }

  append(messages: readonly Message[]): Promise<void> {
    const stored = storableMessages(messages);
    if (stored.length === 0) return Promise.resolve();
    this.#dropOpening();
    return this.#serially(() => this.#writeMessages("append", stored).then(() => {}));
  }

  replace(messages: readonly Message[]): Promise<void> {
    this.#dropOpening();
    return this.#serially(async () => {
      const { firstSeq } = await this.#writeMessages("snapshot", storableMessages(messages));
      await this.#messages.purgeBefore(firstSeq);
    });
  }

  /** An empty snapshot (so later writes still have a sequence to expect) and no pending approval; the seq mark stays. */
  clear(): Promise<void> {
    this.#dropOpening();
    return this.#serially(async () => {
      const { firstSeq } = await this.#writeMessages("snapshot", []);
      await this.#messages.purgeBefore(firstSeq);
      await this.#approvals.purgeAll();
    });
  }

  async loadSeq(): Promise<number> {
    const last = await (this.#fromOpening("seqMark") ?? this.#guard(this.#seqMarks.lastRecord()));
    const seq = last === undefined ? 0 : this.#seqOf(last);
    this.#seqMark = { seq, subjectSeq: last?.lastSeq ?? 0 };
    return seq;
  }

  /**
   * Never lowers the mark: written only over the mark it last read or wrote (see `#seqMark`),
   * read again and retried when another writer moved it.
   */
  async saveSeq(seq: number): Promise<void> {
    this.#dropOpening();
    let known = this.#seqMark;
    const attempts = SEQ_MARK_ATTEMPTS + (known === undefined ? 0 : 1);
    for (let attempt = 1; ; attempt++) {
      const { seq: mark, subjectSeq } = known ?? (await this.#readSeqMark());
      known = undefined;
      if (mark >= seq) return;
      this.#fence();
      try {
        const written = await this.#seqMarks.write("seq", encoder.encode(JSON.stringify(seq)), subjectSeq);
        this.#seqMark = { seq, subjectSeq: written.lastSeq };
        await this.#seqMarks.purgeBefore(written.firstSeq);
        return;
      } catch (error) {
        if (!isWrongLastSequence(error) || attempt >= attempts) throw this.#conflictOr(error, subjectSeq);
      }
    }
  }

  /** The seq mark and its subject's last sequence, read from the server. */
  async #readSeqMark(): Promise<{ seq: number; subjectSeq: number }> {
    const { records, lastSeq } = await this.#read(this.#seqMarks);
    const last = records.at(-1);
    const mark = { seq: last === undefined ? 0 : this.#seqOf(last), subjectSeq: lastSeq };
    this.#seqMark = mark;
    return mark;
  }

  async loadPendingApproval(): Promise<PendingApproval | undefined> {
    const last = await (this.#fromOpening("approval") ?? this.#guard(this.#approvals.lastRecord()));
    if (last === undefined || last.kind !== "approval") return undefined;
    const pending = PendingApproval.safeParse(this.#json(last, "the pending approval"));
    if (!pending.success) {
      throw new CorruptHistoryError(
        this.#where(last.firstSeq),
        `not a valid pending approval: ${z.prettifyError(pending.error)}`,
        pending.error,
      );
    }
    return pending.data;
  }

  async savePendingApproval(pending: PendingApproval): Promise<void> {
    this.#dropOpening();
    this.#fence();
    const written = await this.#approvals.write(
      "approval",
      encoder.encode(JSON.stringify(pending)),
      undefined,
    );
    await this.#approvals.purgeBefore(written.firstSeq);
  }

  /** A `none` record over the approval this read: of two takers only one can write it. */
  async takePendingApproval(): Promise<boolean> {
    this.#dropOpening();
    const { records, lastSeq } = await this.#read(this.#approvals);
    if (records.at(-1)?.kind !== "approval") return false;
    this.#fence();
    try {
      const written = await this.#approvals.write("none", new Uint8Array(), lastSeq);
      await this.#approvals.purgeBefore(written.firstSeq);
      return true;
    } catch (error) {
      if (isWrongLastSequence(error)) return false;
      throw error;
    }
  }

  /**
   * A session is opened with three reads in a row (the event seq mark, the pending approval, the
   * messages: see createAgent), one round trip or more each. The first read of this history, of
   * whichever of them, sends all three at once; each of the other two then takes its part, once,
   * while it is fresh. A read that finds no part left (or a stale one) goes to the server.
   */
  #fromOpening<Part extends "messages" | "seqMark" | "approval">(part: Part): OpeningRead[Part] | undefined {
    if (!this.#hasOpened) {
      this.#hasOpened = true;
      this.#opening = {
        messages: handled(this.#read(this.#messages)),
        seqMark: handled(this.#guard(this.#seqMarks.lastRecord())),
        approval: handled(this.#guard(this.#approvals.lastRecord())),
        sentAt: performance.now(),
      };
    }
    const opening = this.#opening;
    if (opening === undefined) return undefined;
    const taken = opening[part];
    opening[part] = undefined;
    if (opening.messages === undefined && opening.seqMark === undefined && opening.approval === undefined)
      this.#opening = undefined;
    return performance.now() - opening.sentAt <= OPENING_READ_FRESH_MS ? taken : undefined;
  }

  /** A write is coming: what the opening read fetched may no longer be what is stored. */
  #dropOpening(): void {
    this.#hasOpened = true;
    this.#opening = undefined;
  }

  /** Runs `operation` after this history's earlier ones, so its own writes never conflict. */
  #serially<T>(operation: () => Promise<T>): Promise<T> {
    const run = (this.#queue ?? Promise.resolve()).then(operation, operation);
    const tail = run.catch(() => {});
    this.#queue = tail;
    // Nothing left to wait for: an idle history holds no settled promise.
    void tail.then(() => {
      if (this.#queue === tail) this.#queue = undefined;
    });
    return run;
  }

  async #writeMessages(kind: "append" | "snapshot", messages: readonly Message[]) {
    this.#fence();
    const expected = this.#lastSeq ?? (await this.#messages.lastSeq());
    try {
      const written = await this.#messages.write(kind, encoder.encode(JSON.stringify(messages)), expected);
      this.#lastSeq = written.lastSeq;
      return written;
    } catch (error) {
      throw this.#conflictOr(error, expected);
    }
  }

  #read(log: JetStreamRecordLog): Promise<RecordLogContents> {
    return this.#guard(log.read());
  }

  /** The read, its stray messages reported as a corrupt history. */
  async #guard<T>(reading: Promise<T>): Promise<T> {
    try {
      return await reading;
    } catch (error) {
      if (error instanceof NotARecordError)
        throw new CorruptHistoryError(this.#where(error.seq), error.message);
      throw error;
    }
  }

  #messagesOf(record: HistoryRecord): Message[] {
    if (record.kind !== "append" && record.kind !== "snapshot") {
      throw new CorruptHistoryError(
        this.#where(record.firstSeq),
        `a "${record.kind}" record among the messages`,
      );
    }
    const json = this.#json(record, "the messages");
    if (!Array.isArray(json)) {
      throw new CorruptHistoryError(
        this.#where(record.firstSeq),
        "the record does not hold a list of messages",
      );
    }
    return json.map((value) => parseStoredMessage(value, this.#where(record.firstSeq)));
  }

  #seqOf(record: HistoryRecord): number {
    const seq = StoredSeq.safeParse(this.#json(record, "the event seq mark"));
    if (!seq.success) {
      throw new CorruptHistoryError(this.#where(record.firstSeq), "the stored event seq is not a count");
    }
    return seq.data;
  }

  #json(record: HistoryRecord, what: string): unknown {
    try {
      return JSON.parse(decoder.decode(record.body));
    } catch (error) {
      throw new CorruptHistoryError(this.#where(record.firstSeq), `${what} is not valid JSON`, error);
    }
  }

  #conflictOr(error: unknown, expectedSeq: number): unknown {
    return isWrongLastSequence(error)
      ? new HistoryConflictError({ agent: this.agent, session: this.session, expectedSeq }, error)
      : error;
  }

  /** `position` of a corrupt record is its stream sequence. */
  #where(position: number) {
    return { agent: this.agent, session: this.session, position };
  }
}

/** The same promise, its rejection marked handled: a part nobody takes must not fail the process. */
function handled<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}

function isWrongLastSequence(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence;
}
