import {
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { retryTransient, whileStarting } from "../bus/jetstream-retry.js";
import { listKvKeys } from "../cluster/kv-keys.js";
import { publishDurably } from "../context/durable-publish.js";
import { firstAndLast, fromStored, readFrom, type SubjectMessage } from "../context/subject-reader.js";
import type { ChatJournal, JournaledSession } from "./chat-journal.js";
import { JournalConflictError } from "./journal-conflict-error.js";
import type { JournalEntry } from "./journal-entry.js";
import { foldJournal, type JournalRecord, type StoredJournalRecord } from "./journal-record.js";

/** The journal's default JetStream KV bucket. */
export const DEFAULT_JOURNAL_BUCKET = "AGENTLOOP_JOURNAL";

/**
 * A key token for a name: letters, digits, `_` and `-` stay, any other character becomes `=` and
 * its UTF-16 code in 4 hex digits (KV keys allow few characters; `=` never occurs unescaped).
 */
export function encodeKeyToken(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, (char) => `=${char.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

export function decodeKeyToken(token: string): string {
  return token.replace(/=([0-9a-f]{4})/g, (_, code: string) =>
    String.fromCharCode(Number.parseInt(code, 16)),
  );
}

const decoder = new TextDecoder();
const encoder = new TextEncoder();

/**
 * The journal in a JetStream KV bucket, one key per record: `<agent>.<session>.<n>` (escaped).
 * A record is published on the bucket's stream with its id as msg id, expecting its key to be new,
 * so it survives a short outage (see {@link publishDurably}); a compaction or a removal purges
 * the session's keys through the stream (`<agent>.<session>.>`), which leaves no markers behind.
 * A version-4 entry (the whole entry under `<agent>.<session>`) is read as a snapshot before the
 * records and purged with them by the journal that read it.
 */
export class KvChatJournal implements ChatJournal {
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #bucket: string;
  readonly #stream: string;
  /** Lists the bucket's keys (see {@link listKvKeys}). */
  readonly #keys: () => Promise<string[]>;
  /** Sessions (their subjects) whose version-4 entry was read: purged with their records. */
  readonly #legacy = new Set<string>();

  private constructor(
    js: JetStreamClient,
    jsm: JetStreamManager,
    bucket: string,
    keys: () => Promise<string[]>,
  ) {
    this.#js = js;
    this.#jsm = jsm;
    this.#bucket = bucket;
    this.#stream = `KV_${bucket}`;
    this.#keys = keys;
  }

  /** Opens the bucket, creating it (one value per key: history 1) if it does not exist. */
  static async open(
    connection: NatsConnection,
    options: { bucket?: string; replicas?: number } = {},
  ): Promise<KvChatJournal> {
    const bucket = options.bucket ?? DEFAULT_JOURNAL_BUCKET;
    await whileStarting("the journal bucket", () =>
      new Kvm(connection).create(bucket, {
        history: 1,
        ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
      }),
    );
    return new KvChatJournal(jetstream(connection), await jetstreamManager(connection), bucket, () =>
      listKvKeys(connection, bucket),
    );
  }

  async load(agent: string, session: string): Promise<JournalEntry | undefined> {
    return foldJournal(await this.readRecords(agent, session)).entry;
  }

  async readRecords(agent: string, session: string): Promise<StoredJournalRecord[]> {
    const head = this.#subjectOf(agent, session);
    const source = { js: this.#js, jsm: this.#jsm, stream: this.#stream, filter: `${head}.*` };
    return retryTransient("journal read", async () => {
      // Gets by subject only: a stream info listing the session's keys cost more the more
      // sessions the bucket held, and every new owner reads every journal it takes over.
      const [bounds, legacy] = await Promise.all([
        firstAndLast(source),
        this.#jsm.streams.getMessage(this.#stream, { last_by_subj: head }),
      ]);
      const messages =
        bounds === null
          ? []
          : bounds.first.seq >= bounds.last.seq
            ? [fromStored(bounds.last)]
            : await readFrom(source, bounds.first, bounds.last.seq);
      // One key per record, written once; the last message per key is what the key holds.
      const latest = new Map<string, SubjectMessage>();
      for (const message of messages) latest.set(message.subject, message);
      const records: StoredJournalRecord[] = [];
      for (const message of latest.values()) {
        const n = Number(message.subject.slice(head.length + 1));
        if (!Number.isSafeInteger(n) || isMarker(message.headers)) continue;
        records.push({ n, text: decoder.decode(message.data) });
      }
      records.sort((a, b) => a.n - b.n);
      if (legacy !== null && !isMarker(legacy.header)) {
        records.unshift(legacySnapshot(legacy.data));
        this.#legacy.add(head);
      }
      return records;
    });
  }

  async append(agent: string, session: string, record: JournalRecord): Promise<void> {
    await this.#publish(agent, session, record);
  }

  async compact(agent: string, session: string, record: JournalRecord): Promise<void> {
    const seq = await this.#publish(agent, session, record);
    // Nothing comes before the stream's first message, and the server reads `seq: 1` as no bound.
    if (seq > 1) await this.#purge(agent, session, seq);
  }

  async remove(agent: string, session: string): Promise<void> {
    await this.#purge(agent, session, undefined);
  }

  async list(): Promise<JournaledSession[]> {
    const sessions = new Map<string, JournaledSession>();
    // Journals are written all the time: the keys are asked of the stream at one moment. Purged
    // sessions leave no key; a version-4 key may hold a purge marker, so those few are read.
    const keys = await this.#keys();
    const present = await Promise.all(
      keys.map(async (key) => {
        if (key.split(".").length !== 2) return key;
        const message = await this.#jsm.streams.getMessage(this.#stream, {
          last_by_subj: `$KV.${this.#bucket}.${key}`,
        });
        return message !== null && !isMarker(message.header) ? key : undefined;
      }),
    );
    for (const key of present) {
      if (key === undefined) continue;
      const [agent, session] = key.split(".");
      if (agent === undefined || session === undefined) continue;
      sessions.set(`${agent}.${session}`, { agent: decodeKeyToken(agent), session: decodeKeyToken(session) });
    }
    return [...sessions.values()].sort(
      (a, b) => a.agent.localeCompare(b.agent) || a.session.localeCompare(b.session),
    );
  }

  #subjectOf(agent: string, session: string): string {
    return `$KV.${this.#bucket}.${encodeKeyToken(agent)}.${encodeKeyToken(session)}`;
  }

  /** Publishes the record under its own key, expected to be new; returns its stream sequence. */
  async #publish(agent: string, session: string, record: JournalRecord): Promise<number> {
    try {
      return await publishDurably({
        js: this.#js,
        jsm: this.#jsm,
        stream: this.#stream,
        subject: `${this.#subjectOf(agent, session)}.${record.n}`,
        data: encoder.encode(JSON.stringify(record)),
        msgId: record.id,
        expectedLastSubjectSeq: 0,
      });
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence))
        throw error;
      throw new JournalConflictError(
        `journal record ${record.n} of ${agent}/${session} was written by another writer`,
        { cause: error },
      );
    }
  }

  /** Purges the session's records (before stream sequence `beforeSeq`, or all) and its version-4 entry. */
  async #purge(agent: string, session: string, beforeSeq: number | undefined): Promise<void> {
    const head = this.#subjectOf(agent, session);
    const hasLegacy = this.#legacy.has(head);
    await retryTransient("journal purge", () =>
      Promise.all([
        this.#jsm.streams.purge(this.#stream, {
          filter: `${head}.*`,
          ...(beforeSeq === undefined ? {} : { seq: beforeSeq }),
        }),
        hasLegacy ? this.#jsm.streams.purge(this.#stream, { filter: head }) : undefined,
      ]),
    );
    this.#legacy.delete(head);
  }
}

/** A KV delete or purge marker (`KV-Operation: DEL | PURGE`). */
function isMarker(header: { get(name: string): string } | undefined): boolean {
  const operation = header?.get("KV-Operation") ?? "";
  return operation === "DEL" || operation === "PURGE";
}

/** A version-4 entry as a snapshot record numbered 0, before any record of this version. */
function legacySnapshot(data: Uint8Array): StoredJournalRecord {
  let snapshot: unknown;
  try {
    snapshot = JSON.parse(decoder.decode(data));
  } catch {
    snapshot = null;
  }
  return { n: 0, text: JSON.stringify({ n: 1, id: "v4", snapshot, steps: [] }) };
}
