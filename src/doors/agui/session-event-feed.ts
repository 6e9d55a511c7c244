import { DeliverPolicy, type JetStreamManager, jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Bus, Subscription } from "../../bus/bus.js";
import { eventStreamName, lastStoredSeq } from "../../bus/event-log.js";
import { allEventsPattern, sessionEventsPattern } from "../../bus/subjects.js";
import { parseEventJson } from "../../events/parse-event.js";
import type { AgentEvent } from "../../events/types.js";

/**
 * One session's events, from the first one still held and then live, each with its sequence
 * number; once everything held has gone by, a `caughtUp` marker. Ends only when `signal` aborts.
 */
export type FeedItem = { seq: number; event: AgentEvent } | { caughtUp: true };

/** Where the door reads a session's events from. */
export interface SessionEventSource {
  /** `jetstream`: the event log's stream sequence; `memory`: this process's own buffer. */
  readonly kind: "jetstream" | "memory";
  /** The sequence number of the last event held now: anything later is newer than this call. */
  lastSeq(): Promise<number>;
  /** The session's events, held ones first, then live. */
  feed(agent: string, session: string, signal: AbortSignal): AsyncGenerator<FeedItem, void, undefined>;
  close(): void;
}

/**
 * The JetStream event log (`<PREFIX>_EVENTS`) as a feed: an ordered consumer filtered on the
 * session, from the stream's start, that stays on for new events. The sequence numbers are the
 * stream's, so they mean the same to every door of the system and survive its restarts.
 */
export class JetStreamEventSource implements SessionEventSource {
  readonly kind = "jetstream";
  readonly #connection: NatsConnection;
  readonly #prefix: string;
  readonly #stream: string;
  #manager: Promise<JetStreamManager> | undefined;

  constructor(connection: NatsConnection, prefix: string) {
    this.#connection = connection;
    this.#prefix = prefix;
    this.#stream = eventStreamName(prefix);
  }

  /** True when the event log exists (a host on this NATS system created it). */
  async isAvailable(): Promise<boolean> {
    try {
      await this.lastSeq();
      return true;
    } catch {
      return false;
    }
  }

  async lastSeq(): Promise<number> {
    this.#manager ??= jetstreamManager(this.#connection, { checkAPI: false });
    const manager = await this.#manager.catch((error: unknown) => {
      this.#manager = undefined;
      throw error;
    });
    const info = await manager.streams.info(this.#stream);
    return info.state.last_seq;
  }

  async *feed(
    agent: string,
    session: string,
    signal: AbortSignal,
  ): AsyncGenerator<FeedItem, void, undefined> {
    const filter = sessionEventsPattern(this.#prefix, agent, session);
    // Caught up with the last record held when the feed starts, read from the stream: the consumer's
    // own pending count can stay above zero on nats-server 2.9 (see replayEvents).
    const lastHeld = await lastStoredSeq(this.#connection, { filter, streamName: this.#stream });
    const consumer = await jetstream(this.#connection).consumers.get(this.#stream, {
      filter_subjects: filter,
      deliver_policy: DeliverPolicy.All,
    });
    const messages = await consumer.consume({ max_messages: 256 });
    const stop = (): void => void messages.stop();
    signal.addEventListener("abort", stop, { once: true });
    try {
      let isCaughtUp = lastHeld === undefined;
      if (isCaughtUp) yield { caughtUp: true };
      for await (const message of messages) {
        if (signal.aborted) break;
        const parsed = parseEventJson(message.string());
        // Records that are not events, or of kinds newer than this version, have nothing to show.
        if (parsed.status === "known") yield { seq: message.seq, event: parsed.event };
        if (!isCaughtUp && (message.seq >= (lastHeld ?? 0) || message.info.pending === 0)) {
          isCaughtUp = true;
          yield { caughtUp: true };
        }
      }
    } finally {
      signal.removeEventListener("abort", stop);
      messages.stop();
      await consumer.delete().catch(() => {
        // Ephemeral: the server drops it after its inactivity threshold anyway.
      });
    }
  }

  close(): void {}
}

export interface MemoryEventSourceOptions {
  /** Events kept per session (the oldest go first); default 10,000. */
  eventsPerSession?: number;
  /** Sessions kept (the least recently active go first); default 1,000. */
  sessions?: number;
}

/**
 * Without JetStream (the in-process bus): the door listens to every event on the bus itself and
 * keeps each session's recent events in memory, numbered by its own counter. A reconnect is served
 * from there: what this process saw since it started, within the bounds above.
 */
export class MemoryEventSource implements SessionEventSource {
  readonly kind = "memory";
  readonly #buffers = new Map<string, Array<{ seq: number; event: AgentEvent }>>();
  readonly #listeners = new Map<string, Set<(item: { seq: number; event: AgentEvent }) => void>>();
  readonly #subscription: Subscription;
  readonly #eventsPerSession: number;
  readonly #sessions: number;
  #seq = 0;

  constructor(bus: Bus, prefix: string, options: MemoryEventSourceOptions = {}) {
    this.#eventsPerSession = options.eventsPerSession ?? 10_000;
    this.#sessions = options.sessions ?? 1_000;
    this.#subscription = bus.subscribe(allEventsPattern(prefix), (message) => {
      const parsed = parseEventJson(message.data);
      if (parsed.status === "known") this.#record(parsed.event);
    });
  }

  async lastSeq(): Promise<number> {
    return this.#seq;
  }

  async *feed(
    agent: string,
    session: string,
    signal: AbortSignal,
  ): AsyncGenerator<FeedItem, void, undefined> {
    const key = `${agent}/${session}`;
    const queue: Array<{ seq: number; event: AgentEvent }> = [];
    let wake: (() => void) | undefined;
    const listener = (item: { seq: number; event: AgentEvent }): void => {
      queue.push(item);
      wake?.();
    };
    const onAbort = (): void => wake?.();
    let listeners = this.#listeners.get(key);
    if (listeners === undefined) {
      listeners = new Set();
      this.#listeners.set(key, listeners);
    }
    listeners.add(listener);
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      const held = [...(this.#buffers.get(key) ?? [])];
      for (const item of held) {
        if (signal.aborted) return;
        yield item;
      }
      yield { caughtUp: true };
      let last = held.at(-1)?.seq ?? 0;
      while (!signal.aborted) {
        const item = queue.shift();
        if (item === undefined) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        if (item.seq <= last) continue;
        last = item.seq;
        yield item;
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      listeners.delete(listener);
      if (listeners.size === 0) this.#listeners.delete(key);
    }
  }

  close(): void {
    this.#subscription.unsubscribe();
  }

  #record(event: AgentEvent): void {
    const key = `${event.agent}/${event.session}`;
    const item = { seq: ++this.#seq, event };
    let buffer = this.#buffers.get(key);
    if (buffer === undefined) {
      buffer = [];
    } else {
      this.#buffers.delete(key);
    }
    // Re-inserted: the map's order is the sessions' last activity.
    this.#buffers.set(key, buffer);
    buffer.push(item);
    if (buffer.length > this.#eventsPerSession) buffer.shift();
    if (this.#buffers.size > this.#sessions) {
      const oldest = this.#buffers.keys().next().value;
      if (oldest !== undefined) this.#buffers.delete(oldest);
    }
    for (const listener of this.#listeners.get(key) ?? []) listener(item);
  }
}
