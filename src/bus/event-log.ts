import {
  type Consumer,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstream,
  jetstreamManager,
  type OrderedConsumerOptions,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from "@nats-io/jetstream";
import { type NatsConnection, nanos } from "@nats-io/transport-node";
import { parseEventJson } from "../events/parse-event.js";
import type { AgentEvent, UnknownEvent } from "../events/types.js";
import { BusError } from "./bus-errors.js";
import { whileStarting } from "./jetstream-retry.js";
import { allEventsPattern, DEFAULT_PREFIX, jetStreamName } from "./subjects.js";

/**
 * The event log: a JetStream stream over `<prefix>.events.>`. Events are published with plain
 * core-NATS publishes (hundreds of thousands per second, where acknowledged JetStream
 * publishes manage a few thousand); the stream captures them server-side, so logging costs the
 * publisher nothing. Built for nats-server 2.9: one filter subject per consumer and a
 * stream-level `max_age` (no per-message TTL).
 */

/** The stream name for the default prefix. */
export const EVENT_STREAM_NAME = "AGENTLOOP_EVENTS";

/** How long events are kept when the caller does not say (7 days). */
export const DEFAULT_EVENT_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;

/** The dedupe window JetStream defaults to; it may not exceed `max_age`. */
const DEFAULT_DUPLICATE_WINDOW_MS = 2 * 60 * 1000;

/** `AGENTLOOP_EVENTS` for the default prefix, `<PREFIX>_EVENTS` otherwise. */
export function eventStreamName(prefix: string = DEFAULT_PREFIX): string {
  return jetStreamName(prefix, "EVENTS");
}

export interface EnsureEventStreamOptions {
  prefix?: string;
  /** Bucket-level retention (default 7 days): older events are discarded. */
  maxAgeMs?: number;
  /** Overrides the name derived from the prefix. */
  streamName?: string;
  /** Replicas when the stream is created (default 1); an existing stream keeps its own. */
  replicas?: number;
}

/**
 * Creates the event stream, or updates its subjects and retention when it exists. Idempotent:
 * every host and `tail` may call it at start.
 * @returns the stream's name.
 */
export async function ensureEventStream(
  connection: NatsConnection,
  options: EnsureEventStreamOptions = {},
): Promise<string> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const name = options.streamName ?? eventStreamName(prefix);
  const maxAgeMs = options.maxAgeMs ?? DEFAULT_EVENT_MAX_AGE_MS;
  if (!(maxAgeMs > 0)) throw new RangeError(`maxAgeMs must be positive, got ${maxAgeMs}`);
  const manager = await jetstreamManager(connection);
  const settings = {
    subjects: [allEventsPattern(prefix)],
    max_age: nanos(maxAgeMs),
    duplicate_window: nanos(Math.min(DEFAULT_DUPLICATE_WINDOW_MS, maxAgeMs)),
    discard: DiscardPolicy.Old,
  } satisfies Partial<StreamConfig>;
  await whileStarting("the event log stream", async () => {
    try {
      const existing = await manager.streams.info(name);
      await manager.streams.update(name, { ...existing.config, ...settings });
    } catch (error) {
      if (!isStreamNotFound(error)) throw error;
      await manager.streams.add({
        name,
        ...settings,
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        num_replicas: options.replicas ?? 1,
      });
    }
  });
  return name;
}

/**
 * Where a replay starts: events from the last `durationMs`, from a stream sequence, from a time, or
 * only the last event stored on each subject the filter matches (`lastPerSubject`: with a
 * session's filter, its latest event of each kind).
 */
export type ReplayStart =
  | { durationMs: number }
  | { seq: number }
  | { time: Date }
  | { lastPerSubject: true };

export interface ReplayEventsOptions {
  /** Subject filter (one subject, NATS wildcards), default `<prefix>.events.>`. */
  filter?: string;
  since: ReplayStart;
  prefix?: string;
  /** Overrides the name derived from the prefix. */
  streamName?: string;
  /** Ends the replay: the iterator throws the signal's reason. */
  signal?: AbortSignal;
  /** Clock for `durationMs` (injectable for tests). */
  now?: () => number;
  /**
   * Told about each stored record that is not an event (the stream captures whatever is published
   * on its subjects), with the reason; such records are skipped. Default: skipped silently.
   */
  onSkipped?: (record: SkippedRecord) => void;
}

/** A stored record the replay skipped: not JSON, or not a valid event. */
export interface SkippedRecord {
  seq: number;
  subject: string;
  reason: string;
}

/** Where an event read back from the log was stored. */
interface StoredRecord {
  /** Stream sequence: resume a later replay with `{ seq: seq + 1 }`. */
  seq: number;
  subject: string;
  /** When the server stored it. */
  time: Date;
  /** The payload as published (JSON). */
  data: string;
}

/**
 * One event read back from the log: of a kind this version knows, or (forward compatibility) of a
 * newer kind with valid common fields, kept as it was published.
 */
export type StoredEvent =
  | (StoredRecord & { isKnownKind: true; event: AgentEvent })
  | (StoredRecord & { isKnownKind: false; event: UnknownEvent });

/**
 * Replays stored events in stream order and finishes once caught up (nothing pending). Runs an
 * ordered consumer (ephemeral, in memory, no acks) with a single filter subject. Every record is
 * checked by the one event parser ({@link parseEventJson}); records that are not events are skipped
 * and reported to `onSkipped`: the stream captures whatever is published on its subjects.
 */
export async function* replayEvents(
  connection: NatsConnection,
  options: ReplayEventsOptions,
): AsyncGenerator<StoredEvent, void, undefined> {
  const { signal } = options;
  signal?.throwIfAborted();
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const streamName = options.streamName ?? eventStreamName(prefix);
  const consumerOptions: Partial<OrderedConsumerOptions> = {
    filter_subjects: options.filter ?? allEventsPattern(prefix),
    ...startOptions(options.since, options.now ?? Date.now),
  };

  let consumer: Consumer;
  try {
    consumer = await jetstream(connection).consumers.get(streamName, consumerOptions);
  } catch (error) {
    if (isStreamNotFound(error)) {
      throw new BusError(`the event log ${streamName} does not exist: no host has created it yet`, {
        cause: error,
      });
    }
    throw error;
  }
  try {
    const info = await consumer.info(true);
    if (info.num_pending === 0) return;
    const messages = await consumer.consume({ max_messages: 256 });
    const stop = (): void => {
      messages.stop();
    };
    signal?.addEventListener("abort", stop, { once: true });
    try {
      for await (const message of messages) {
        // stop() ends the fetching, not the batch already buffered.
        if (signal?.aborted) break;
        const data = message.string();
        const parsed = parseEventJson(data);
        const record = { seq: message.seq, subject: message.subject, time: message.time, data };
        if (parsed.status === "known") yield { ...record, isKnownKind: true, event: parsed.event };
        else if (parsed.status === "unknown-kind")
          yield { ...record, isKnownKind: false, event: parsed.event };
        else options.onSkipped?.({ seq: message.seq, subject: message.subject, reason: parsed.reason });
        if (message.info.pending === 0) break;
      }
    } finally {
      signal?.removeEventListener("abort", stop);
      messages.stop();
    }
    signal?.throwIfAborted();
  } finally {
    await consumer.delete().catch(() => {
      // Ephemeral and in memory: the server drops it after its inactivity threshold anyway.
    });
  }
}

function startOptions(since: ReplayStart, now: () => number): Partial<OrderedConsumerOptions> {
  if ("lastPerSubject" in since) return { deliver_policy: DeliverPolicy.LastPerSubject };
  if ("seq" in since) {
    if (!Number.isInteger(since.seq) || since.seq < 1) {
      throw new RangeError(`since.seq must be a positive integer, got ${since.seq}`);
    }
    return { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: since.seq };
  }
  const time = "time" in since ? since.time : new Date(now() - since.durationMs);
  if (Number.isNaN(time.getTime())) throw new RangeError("the replay start time is invalid");
  return { deliver_policy: DeliverPolicy.StartTime, opt_start_time: time.toISOString() };
}

function isStreamNotFound(error: unknown): boolean {
  return error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamNotFound;
}
