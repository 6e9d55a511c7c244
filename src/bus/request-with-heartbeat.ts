import type { Bus, BusMessage } from "./bus.js";
import { BusError } from "./bus-errors.js";
import { HEARTBEAT_TIMEOUT_MS, parseSessionHeartbeat } from "./session-heartbeat.js";

/** The host working on a request stopped beating: it died or lost its connection, no reply will come. */
export class HostSilentError extends BusError {
  override readonly code = "host_silent";
  readonly subject: string;
  readonly heartbeatSubject: string;
  readonly silentMs: number;
  /** The silence for people: `10 s`, or `50 ms` below a second. */
  readonly silentFor: string;

  constructor(subject: string, heartbeatSubject: string, silentMs: number) {
    const silentFor = silentMs < 1_000 ? `${silentMs} ms` : `${Math.round(silentMs / 1000)} s`;
    super(
      `no heartbeat from the host serving ${subject} for ${silentFor} (on ${heartbeatSubject}): it stopped, crashed or lost its NATS connection`,
    );
    this.subject = subject;
    this.heartbeatSubject = heartbeatSubject;
    this.silentMs = silentMs;
    this.silentFor = silentFor;
  }
}

export interface RequestWithHeartbeatOptions {
  /** Where the serving host beats: `sessionHeartbeatSubject(prefix, agent, session)`. */
  heartbeatSubject: string;
  /** Silence that means the host is gone; default {@link HEARTBEAT_TIMEOUT_MS}. */
  heartbeatTimeoutMs?: number;
  /** The request's overall limit (the bus default when unset). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Headers sent with the request. */
  headers?: Record<string, string>;
}

/**
 * A request/reply that notices a vanished host within seconds instead of waiting out its timeout:
 * it watches the session's heartbeat subject (see session-heartbeat.ts) from before the request
 * is sent, and rejects with {@link HostSilentError} when no heartbeat arrives for the timeout (or
 * three of the host's advertised intervals, whichever is longer). The first beat is due as soon as
 * the host has the request, so a host that dies before it too is noticed. Nobody listening is
 * still `NoRespondersError` at once; an aborted `signal` rejects with its reason, as `request` does.
 */
export async function requestWithHeartbeat(
  bus: Bus,
  subject: string,
  data: string,
  options: RequestWithHeartbeatOptions,
): Promise<BusMessage> {
  const limit = options.heartbeatTimeoutMs ?? HEARTBEAT_TIMEOUT_MS;
  const silence = new AbortController();
  let patience = limit;
  let lastBeatAt = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const arm = (delay = patience) => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      // Our own connection was away: the silence says nothing about the host. Wait while we are
      // disconnected, and give the host a full window from when we came back (it may reconnect later).
      const connectivity = bus.connectivity?.();
      if (connectivity !== undefined) {
        if (!connectivity.isConnected) return arm();
        const sinceBack = Date.now() - connectivity.reconnectedAt;
        if (connectivity.reconnectedAt > lastBeatAt && sinceBack < patience) return arm(patience - sinceBack);
      }
      silence.abort(new HostSilentError(subject, options.heartbeatSubject, Date.now() - lastBeatAt));
    }, delay);
  };
  const subscription = bus.subscribe(options.heartbeatSubject, (message) => {
    const beat = parseSessionHeartbeat(message.data);
    if (beat === undefined || silence.signal.aborted) return;
    lastBeatAt = Date.now();
    patience = Math.max(limit, 3 * beat.intervalMs);
    arm();
  });
  try {
    // The subscription must be in place at the server before the host can beat.
    await bus.flush();
    lastBeatAt = Date.now();
    arm();
    const signal =
      options.signal === undefined ? silence.signal : AbortSignal.any([options.signal, silence.signal]);
    return await bus.request(subject, data, {
      signal,
      ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
      ...(options.headers === undefined ? {} : { headers: options.headers }),
    });
  } finally {
    clearTimeout(timer);
    subscription.unsubscribe();
  }
}
