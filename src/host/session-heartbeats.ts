import type { Bus } from "../bus/bus.js";
import { HEARTBEAT_INTERVAL_MS, type SessionHeartbeat } from "../bus/session-heartbeat.js";
import { sessionHeartbeatSubject } from "../bus/subjects.js";
import { createHostId } from "../config/host-id.js";

export interface SessionHeartbeatsOptions {
  bus: Bus;
  prefix: string;
  /** Named in every beat; default {@link createHostId}. */
  hostId?: string;
  /** Default {@link HEARTBEAT_INTERVAL_MS}. */
  intervalMs?: number;
  /** Clock in ms since the epoch. */
  now?: () => number;
}

interface BusySession {
  agent: string;
  session: string;
  requests: number;
}

/**
 * The host's side of the session heartbeat (see bus/session-heartbeat.ts): every session with a
 * request in hand gets a beat at once and then one per interval until its last request is
 * answered. No timer runs while nothing is in hand.
 */
export class SessionHeartbeats {
  readonly hostId: string;
  readonly intervalMs: number;
  readonly #bus: Bus;
  readonly #prefix: string;
  readonly #now: () => number;
  readonly #busy = new Map<string, BusySession>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: SessionHeartbeatsOptions) {
    this.#bus = options.bus;
    this.#prefix = options.prefix;
    this.hostId = options.hostId ?? createHostId();
    this.intervalMs = options.intervalMs ?? HEARTBEAT_INTERVAL_MS;
    this.#now = options.now ?? Date.now;
  }

  /** Sessions beating now. */
  get size(): number {
    return this.#busy.size;
  }

  /** A request for the session is in hand: beats until the returned release is called. */
  track(agent: string, session: string): () => void {
    const key = `${agent}/${session}`;
    let entry = this.#busy.get(key);
    if (entry === undefined) {
      entry = { agent, session, requests: 0 };
      this.#busy.set(key, entry);
    }
    entry.requests += 1;
    // At once: the client learns that a live host has its request.
    this.#beat(entry);
    this.#timer ??= setInterval(() => this.#beatAll(), this.intervalMs).unref();
    let isReleased = false;
    const busy = entry;
    return () => {
      if (isReleased) return;
      isReleased = true;
      busy.requests -= 1;
      if (busy.requests > 0) return;
      this.#busy.delete(key);
      if (this.#busy.size === 0) this.#stopTimer();
    };
  }

  /** Stops beating (the host has closed). */
  close(): void {
    this.#busy.clear();
    this.#stopTimer();
  }

  #stopTimer(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  #beatAll(): void {
    for (const entry of this.#busy.values()) this.#beat(entry);
  }

  #beat(entry: BusySession): void {
    const beat: SessionHeartbeat = {
      host: this.hostId,
      agent: entry.agent,
      session: entry.session,
      ts: new Date(this.#now()).toISOString(),
      intervalMs: this.intervalMs,
      requests: entry.requests,
    };
    this.#bus.publish(
      sessionHeartbeatSubject(this.#prefix, entry.agent, entry.session),
      JSON.stringify(beat),
    );
  }
}
