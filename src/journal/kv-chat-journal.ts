import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { listKvKeys } from "../cluster/kv-keys.js";
import {
  type ChatJournal,
  type JournalEntry,
  type JournaledSession,
  parseJournalEntry,
} from "./chat-journal.js";

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

/** The journal in a JetStream KV bucket, one key per session: `<agent>.<session>` (escaped). */
export class KvChatJournal implements ChatJournal {
  readonly #kv: KV;

  /** Lists the bucket's keys (see {@link listKvKeys}). */
  readonly #keys: () => Promise<string[]>;

  private constructor(kv: KV, keys: () => Promise<string[]>) {
    this.#kv = kv;
    this.#keys = keys;
  }

  /** Opens the bucket, creating it (one value per key: history 1) if it does not exist. */
  static async open(
    connection: NatsConnection,
    options: { bucket?: string; replicas?: number } = {},
  ): Promise<KvChatJournal> {
    const bucket = options.bucket ?? DEFAULT_JOURNAL_BUCKET;
    const kv = await new Kvm(connection).create(bucket, {
      history: 1,
      ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
    });
    return new KvChatJournal(kv, () => listKvKeys(connection, bucket));
  }

  async load(agent: string, session: string): Promise<JournalEntry | undefined> {
    const entry = await this.#kv.get(keyOf(agent, session));
    if (entry === null || entry.operation !== "PUT") return undefined;
    return parseJournalEntry(entry.string());
  }

  async save(agent: string, session: string, entry: JournalEntry): Promise<void> {
    await this.#kv.put(keyOf(agent, session), JSON.stringify(entry));
  }

  async remove(agent: string, session: string): Promise<void> {
    // Purge, not delete: a purged key leaves one marker instead of its whole past.
    await this.#kv.purge(keyOf(agent, session));
  }

  async list(): Promise<JournaledSession[]> {
    const sessions: JournaledSession[] = [];
    // Journals are saved all the time: the keys are asked of the stream at one moment. A removed
    // session's key still holds its purge marker: only keys holding an entry are listed.
    const keys = await this.#keys();
    const present = await Promise.all(
      keys.map(async (key) => ((await this.#kv.get(key))?.operation === "PUT" ? key : undefined)),
    );
    for (const key of present) {
      if (key === undefined) continue;
      const [agent, session] = key.split(".");
      if (agent === undefined || session === undefined) continue;
      sessions.push({ agent: decodeKeyToken(agent), session: decodeKeyToken(session) });
    }
    return sessions.sort((a, b) => a.agent.localeCompare(b.agent) || a.session.localeCompare(b.session));
  }
}

function keyOf(agent: string, session: string): string {
  return `${encodeKeyToken(agent)}.${encodeKeyToken(session)}`;
}
