import type { JetStreamClient, JetStreamManager, StoredMsg } from "@nats-io/jetstream";
import { headers, nuid } from "@nats-io/transport-node";
import { retryTransient } from "../bus/jetstream-retry.js";
import { AgentloopError } from "../errors/agentloop-error.js";
import { publishDurably } from "./durable-publish.js";
import {
  assembleRecords,
  BATCH_HEADER,
  type HistoryRecord,
  isRecordKind,
  PART_HEADER,
  parsePartHeader,
  RECORD_HEADER,
  type RecordKind,
  type RecordPart,
  splitBody,
} from "./history-records.js";
import { firstAndLast, fromStored, readBetween } from "./subject-reader.js";

/** What a {@link JetStreamRecordLog} needs from its store. */
export interface RecordLogTarget {
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  subject: string;
  /** The most body bytes one part may carry now (the server's max payload minus room for headers). */
  maxPartBytes: () => number;
}

/** Everything stored on a subject, as complete records, and the subject's last sequence. */
export interface RecordLogContents {
  records: HistoryRecord[];
  /** The subject's last stream sequence (0: nothing stored), including incomplete records. */
  lastSeq: number;
}

/** A stored message that is not a record part (someone else published on the subject). */
export class NotARecordError extends AgentloopError {
  readonly code = "corrupt_history";
  readonly retryable = false;
  readonly seq: number;

  constructor(seq: number, reason: string) {
    super(reason);
    this.seq = seq;
  }
}

/**
 * The records of one subject of the history stream: reads them all (message gets, a consumer only
 * for a long subject: see {@link readBetween}), writes one record as one or more parts, each
 * published with the expected last subject sequence, and purges what a newer record supersedes.
 */
export class JetStreamRecordLog {
  readonly #target: RecordLogTarget;

  constructor(target: RecordLogTarget) {
    this.#target = target;
  }

  get subject(): string {
    return this.#target.subject;
  }

  /** The log of the subject `<subject>.<token>` in the same stream. */
  below(token: string): JetStreamRecordLog {
    return new JetStreamRecordLog({ ...this.#target, subject: `${this.#target.subject}.${token}` });
  }

  /** The subject's last stream sequence, 0 when it holds nothing. */
  async lastSeq(): Promise<number> {
    const last = await this.#last();
    return last?.seq ?? 0;
  }

  /** Every complete record on the subject, oldest first. */
  read(): Promise<RecordLogContents> {
    return retryTransient("read", () => this.#readAll());
  }

  /**
   * The subject's last complete record (undefined when it holds none). A mark's subject holds one
   * small record, so this is one message get; a last message that is one part of several falls
   * back to reading the whole subject.
   */
  lastRecord(): Promise<HistoryRecord | undefined> {
    return retryTransient("read", async () => {
      const last = await this.#lastMessage();
      if (last === null) return undefined;
      if (parsePartHeader(last.header.get(PART_HEADER))?.parts !== 1)
        return (await this.#readAll()).records.at(-1);
      const part = partOf(last.seq, last.header, last.data);
      return { kind: part.kind, body: part.body, firstSeq: part.seq, lastSeq: part.seq };
    });
  }

  async #readAll(): Promise<RecordLogContents> {
    const { js, jsm, stream, subject } = this.#target;
    const source = { js, jsm, stream, filter: subject };
    const bounds = await firstAndLast(source);
    if (bounds === null) return { records: [], lastSeq: 0 };
    const { first, last } = bounds;
    const messages = first.seq >= last.seq ? [fromStored(last)] : await readBetween(source, first, last);
    const parts = messages.map((message) => partOf(message.seq, message.headers, message.data));
    const lastSeq = parts.reduce((highest, part) => Math.max(highest, part.seq), last.seq);
    return { records: assembleRecords(parts), lastSeq };
  }

  /**
   * Writes one record (parts as needed), each part expecting the subject's last sequence to be
   * the previous one's; `expectedLastSeq` undefined writes without that check.
   * @returns the stream sequences of its first and last part.
   * @throws the JetStream error (code 10071) when another writer came in between.
   */
  async write(
    kind: RecordKind,
    body: Uint8Array,
    expectedLastSeq: number | undefined,
  ): Promise<{ firstSeq: number; lastSeq: number }> {
    const { js, subject } = this.#target;
    const bodies = splitBody(body, this.#target.maxPartBytes());
    const batch = nuid.next();
    let expected = expectedLastSeq;
    let firstSeq = 0;
    for (const [index, part] of bodies.entries()) {
      const partHeaders = headers();
      partHeaders.set(RECORD_HEADER, kind);
      partHeaders.set(BATCH_HEADER, batch);
      partHeaders.set(PART_HEADER, `${index + 1}/${bodies.length}`);
      // The batch id and part number identify the part, so a retry after a lost ack recognises it.
      const seq = await publishDurably({
        js,
        jsm: this.#target.jsm,
        stream: this.#target.stream,
        subject,
        data: part,
        headers: partHeaders,
        msgId: `${batch}.${index + 1}`,
        ...(expected === undefined ? {} : { expectedLastSubjectSeq: expected }),
      });
      if (index === 0) firstSeq = seq;
      expected = seq;
    }
    return { firstSeq, lastSeq: expected ?? firstSeq };
  }

  /** Removes the subject's messages before stream sequence `seq`. */
  async purgeBefore(seq: number): Promise<void> {
    // Nothing comes before 1, and the server reads `seq: 1` as no bound at all: it would purge everything.
    if (seq <= 1) return;
    await retryTransient("purge", () =>
      this.#target.jsm.streams.purge(this.#target.stream, { filter: this.#target.subject, seq }),
    );
  }

  /** Removes every message of the subject. */
  async purgeAll(): Promise<void> {
    await retryTransient("purge", () =>
      this.#target.jsm.streams.purge(this.#target.stream, { filter: this.#target.subject }),
    );
  }

  #last(): Promise<StoredMsg | null> {
    return retryTransient("read", () => this.#lastMessage());
  }

  #lastMessage(): Promise<StoredMsg | null> {
    return this.#target.jsm.streams.getMessage(this.#target.stream, { last_by_subj: this.#target.subject });
  }
}

function partOf(
  seq: number,
  messageHeaders: { get(name: string): string } | undefined,
  body: Uint8Array,
): RecordPart {
  const kind = messageHeaders?.get(RECORD_HEADER);
  if (!isRecordKind(kind))
    throw new NotARecordError(seq, `not a history record (${RECORD_HEADER}: ${kind ?? "none"})`);
  const batch = messageHeaders?.get(BATCH_HEADER) ?? "";
  const position = parsePartHeader(messageHeaders?.get(PART_HEADER));
  if (batch === "" || position === undefined) {
    throw new NotARecordError(seq, "a history record part without its batch or part headers");
  }
  return { seq, kind, batch, ...position, body };
}
