import {
  type Consumer,
  DeliverPolicy,
  DiscardPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  type JetStreamManager,
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
import { permissionDenialOf } from "./nats-permission-error.js";
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

/** Silence after which a replay asks the server whether its last event is still to come. */
const REPLAY_IDLE_CHECK_MS = 1_000;
/** Idle checks that find the last event stored but undelivered before a replay gives up with an error. */
const REPLAY_STALLED_CHECKS = 30;

/**
 * Replays the events stored when it starts, in stream order, and finishes with the last of them.
 * Runs an ordered consumer (ephemeral, in memory, no acks) with a single filter subject. Every record
 * is checked by the one event parser ({@link parseEventJson}); records that are not events are
 * skipped and reported to `onSkipped`: the stream captures whatever is published on its subjects.
 *
 * The end is the sequence of the last record the filter matches when the replay starts, read from
 * the stream itself, not the consumer's pending count: nats-server 2.9 can count records it never
 * delivers (a deleted record that was the last of its subject still counts for `lastPerSubject`),
 * and an ordered consumer that is recreated after a missed heartbeat starts a new count, so waiting
 * for "nothing pending" can wait forever. Records stored after the start are not part of the
 * replay (follow live from the last `seq` + 1). Should that last record be deleted or expire
 * during the replay, the replay ends once nothing has come for a second and the server no longer
 * holds it.
 */
export async function* replayEvents(
  connection: NatsConnection,
  options: ReplayEventsOptions,
): AsyncGenerator<StoredEvent, void, undefined> {
  const { signal } = options;
  signal?.throwIfAborted();
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const streamName = options.streamName ?? eventStreamName(prefix);
  const filter = options.filter ?? allEventsPattern(prefix);
  const consumerOptions: Partial<OrderedConsumerOptions> = {
    filter_subjects: filter,
    ...startOptions(options.since, options.now ?? Date.now),
  };

  // No account-info round trip: a reader's role may replay the event log and nothing else.
  const manager = await jetstreamManager(connection, { checkAPI: false });
  const last = await lastStoredRecord(manager, streamName, filter);
  if (last === undefined || (last !== REFUSED && !isAtOrAfterStart(last, consumerOptions))) return;

  let consumer: Consumer;
  try {
    consumer = await jetstream(connection).consumers.get(streamName, consumerOptions);
  } catch (error) {
    throw missingStreamError(streamName, error);
  }
  try {
    const messages = await consumer.consume({ max_messages: 256 });
    const stop = (): void => {
      messages.stop();
    };
    signal?.addEventListener("abort", stop, { once: true });
    const read = idleAwareReader(messages[Symbol.asyncIterator](), REPLAY_IDLE_CHECK_MS);
    let stalledChecks = 0;
    try {
      for (;;) {
        const next = await read();
        // stop() ends the fetching, not the batch already buffered.
        if (signal?.aborted) break;
        if (next === "idle") {
          // Without the end read from the stream, a silence after the last delivered record is the end.
          if (last === REFUSED) break;
          if ((await manager.streams.getMessage(streamName, { seq: last.seq })) === null) break;
          if (++stalledChecks >= REPLAY_STALLED_CHECKS) {
            throw new BusError(
              `the event log ${streamName} holds event ${last.seq} but did not deliver it in ${
                (REPLAY_IDLE_CHECK_MS * REPLAY_STALLED_CHECKS) / 1000
              } s`,
            );
          }
          continue;
        }
        stalledChecks = 0;
        if (next.done === true) break;
        const message = next.value;
        if (last !== REFUSED && message.seq > last.seq) break;
        const data = message.string();
        const parsed = parseEventJson(data);
        const record = { seq: message.seq, subject: message.subject, time: message.time, data };
        if (parsed.status === "known") yield { ...record, isKnownKind: true, event: parsed.event };
        else if (parsed.status === "unknown-kind")
          yield { ...record, isKnownKind: false, event: parsed.event };
        else options.onSkipped?.({ seq: message.seq, subject: message.subject, reason: parsed.reason });
        if (last === REFUSED ? message.info.pending === 0 : message.seq === last.seq) break;
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

/**
 * The stream sequence of the last record stored on the event log that `filter` matches, or
 * undefined when none is: a reader of the log has caught up once it has read this one (a count of
 * pending records from the consumer is not to be trusted on nats-server 2.9, see {@link replayEvents}).
 */
export async function lastStoredSeq(
  connection: NatsConnection,
  options: { filter: string; prefix?: string; streamName?: string },
): Promise<number | undefined> {
  const streamName = options.streamName ?? eventStreamName(options.prefix ?? DEFAULT_PREFIX);
  const manager = await jetstreamManager(connection, { checkAPI: false });
  const last = await lastStoredRecord(manager, streamName, options.filter);
  return last === REFUSED ? undefined : last?.seq;
}

/**
 * A reader whose NATS permissions predate reading single records of the event log
 * (`$JS.API.STREAM.MSG.GET.<stream>`): it still replays, ending when the consumer counts nothing
 * pending or goes quiet, as readers did before the end was read from the stream.
 */
const REFUSED = "refused";

/**
 * The last record on the stream the filter matches (sequence and time), undefined when none is, or
 * {@link REFUSED} when the reader may not read single records.
 */
async function lastStoredRecord(
  manager: JetStreamManager,
  streamName: string,
  filter: string,
): Promise<{ seq: number; time: Date } | undefined | typeof REFUSED> {
  try {
    const stored = await manager.streams.getMessage(streamName, { last_by_subj: filter });
    return stored === null ? undefined : { seq: stored.seq, time: stored.time };
  } catch (error) {
    if (permissionDenialOf(error) !== undefined) return REFUSED;
    throw missingStreamError(streamName, error);
  }
}

/** Whether a consumer starting as configured would deliver the record: otherwise nothing is to replay. */
function isAtOrAfterStart(
  record: { seq: number; time: Date },
  start: Partial<OrderedConsumerOptions>,
): boolean {
  if (start.opt_start_seq !== undefined) return record.seq >= start.opt_start_seq;
  if (start.opt_start_time !== undefined) return record.time.getTime() >= Date.parse(start.opt_start_time);
  return true;
}

/**
 * Reads an iterator with a deadline per read: `read()` gives the next result, or "idle" when none
 * came within `idleMs`; the read in flight is kept, so the next `read()` goes on waiting for it.
 */
function idleAwareReader<T>(
  iterator: AsyncIterator<T>,
  idleMs: number,
): () => Promise<IteratorResult<T> | "idle"> {
  let inFlight: Promise<IteratorResult<T>> | undefined;
  return async () => {
    inFlight ??= iterator.next();
    let timer: NodeJS.Timeout | undefined;
    const idle = new Promise<"idle">((resolve) => {
      timer = setTimeout(() => resolve("idle"), idleMs);
    });
    try {
      const result = await Promise.race([inFlight, idle]);
      if (result !== "idle") inFlight = undefined;
      return result;
    } finally {
      clearTimeout(timer);
    }
  };
}

function missingStreamError(streamName: string, error: unknown): unknown {
  if (!isStreamNotFound(error)) return error;
  return new BusError(`the event log ${streamName} does not exist: no host has created it yet`, {
    cause: error,
  });
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
