import {
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamClient,
  type JetStreamManager,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { whileStarting } from "../bus/jetstream-retry.js";
import { DEFAULT_PREFIX, jetStreamName } from "../bus/subjects.js";
import { PART_HEADER_ALLOWANCE } from "./history-records.js";
import { NatsContextHistory } from "./nats-context-history.js";

/** The history stream's name for the default prefix. */
export const HISTORY_STREAM_NAME = "AGENTLOOP_HISTORY";

/** The server's default max payload, when the connection does not say. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** `AGENTLOOP_HISTORY` for the default prefix, `<PREFIX>_HISTORY` otherwise. */
export function historyStreamName(prefix: string = DEFAULT_PREFIX): string {
  return jetStreamName(prefix, "HISTORY");
}

/** `<prefix>.history.<agent>.<session>`: a session's messages. Its marks live one token below. */
export function historySubject(prefix: string, agent: string, session: string): string {
  return `${prefix}.history.${agent}.${session}`;
}

/** `<prefix>.history.>`: the history stream's subjects. */
export function allHistoryPattern(prefix: string): string {
  return `${prefix}.history.>`;
}

/** Where the histories are kept and how they are stored. */
export interface NatsHistoryStoreOptions {
  /** The subject prefix the histories live under. @defaultValue `"agentloop"` */
  prefix?: string;
  /** Overrides the name derived from the prefix. @defaultValue `AGENTLOOP_HISTORY` (`<PREFIX>_HISTORY`) */
  streamName?: string;
  /** Caps a part's body below the server's max payload (tests: splitting without megabytes). @defaultValue the server's max payload */
  maxPartBytes?: number;
  /** Replicas when the stream is created; an existing stream keeps its own. @defaultValue 1 */
  replicas?: number;
}

/** Per history: called before each write; throws when this host may no longer write the session. */
export interface NatsHistoryOptions {
  fence?: () => void;
}

/**
 * The JetStream side of the session histories of one host: the stream `AGENTLOOP_HISTORY` over
 * `<prefix>.history.>` (created if missing: file storage, kept until purged, no age limit), and a
 * {@link NatsContextHistory} per session. Works on nats-server 2.9.
 */
export class NatsHistoryStore {
  readonly prefix: string;
  readonly stream: string;
  readonly #connection: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #maxPartBytes: number | undefined;
  /** One function for every session's history (a closure each would be held per live session). */
  readonly #partLimit = (): number => this.maxPartBytes();

  private constructor(
    connection: NatsConnection,
    jsm: JetStreamManager,
    where: { prefix: string; stream: string },
    maxPartBytes: number | undefined,
  ) {
    this.#connection = connection;
    this.#js = jetstream(connection);
    this.#jsm = jsm;
    this.prefix = where.prefix;
    this.stream = where.stream;
    this.#maxPartBytes = maxPartBytes;
  }

  /**
   * Ensures the stream (idempotent: every host calls it at start) and returns the store.
   *
   * @example
   * ```ts
   * import { createAgent, NatsBus, NatsHistoryStore } from "agentloop";
   * import { scriptedModel } from "agentloop/testing";
   *
   * const bus = await NatsBus.connect({ url: "nats://127.0.0.1:4222" }); // nats-server -js
   * const store = await NatsHistoryStore.open(bus.connection);
   * const history = store.history("assistant", "s1"); // kept in JetStream, read back by any host
   * const agent = await createAgent({ llm: scriptedModel([{ text: "hi" }]), model: "any", history });
   * ```
   */
  static async open(
    connection: NatsConnection,
    options: NatsHistoryStoreOptions = {},
  ): Promise<NatsHistoryStore> {
    const prefix = options.prefix ?? DEFAULT_PREFIX;
    const stream = options.streamName ?? historyStreamName(prefix);
    const jsm = await jetstreamManager(connection);
    await whileStarting("the history stream", () =>
      ensureHistoryStream(jsm, stream, allHistoryPattern(prefix), options.replicas ?? 1),
    );
    return new NatsHistoryStore(connection, jsm, { prefix, stream }, options.maxPartBytes);
  }

  /** The history of one session (cheap: nothing is read until it is used). */
  history(agent: string, session: string, options: NatsHistoryOptions = {}): NatsContextHistory {
    return new NatsContextHistory({
      js: this.#js,
      jsm: this.#jsm,
      stream: this.stream,
      subject: historySubject(this.prefix, agent, session),
      agent,
      session,
      maxPartBytes: this.#partLimit,
      ...(options.fence === undefined ? {} : { fence: options.fence }),
    });
  }

  /** The most body bytes one stored message may carry now. */
  maxPartBytes(): number {
    const serverLimit = (this.#connection.info?.max_payload ?? DEFAULT_MAX_PAYLOAD) - PART_HEADER_ALLOWANCE;
    return Math.max(1, Math.min(serverLimit, this.#maxPartBytes ?? serverLimit));
  }
}

async function ensureHistoryStream(
  manager: JetStreamManager,
  name: string,
  subjects: string,
  replicas: number,
): Promise<void> {
  try {
    const existing = await manager.streams.info(name);
    // An operator's settings (replicas, placement) stay; only our subjects are made sure of.
    if (!existing.config.subjects.includes(subjects)) {
      await manager.streams.update(name, {
        ...existing.config,
        subjects: [...existing.config.subjects, subjects],
      });
    }
  } catch (error) {
    if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound)) throw error;
    await manager.streams.add({
      name,
      subjects: [subjects],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      num_replicas: replicas,
    });
  }
}
