import { readFileSync } from "node:fs";
import {
  type Authenticator,
  connect,
  headers as createHeaders,
  credsAuthenticator,
  errors,
  type NatsConnection,
  type NodeConnectionOptions,
} from "@nats-io/transport-node";
import { describeError } from "../errors/describe-error.js";
import { sleep as pause } from "../timers/sleep.js";
import type { Bus, BusMessage, Connectivity, RequestOptions, SubscribeOptions, Subscription } from "./bus.js";
import { DEFAULT_REQUEST_TIMEOUT_MS, type HandlerErrorReporter, reportHandlerError } from "./bus-defaults.js";
import {
  BusClosedError,
  BusConfigError,
  BusError,
  BusTimeoutError,
  InvalidSubjectError,
  NoRespondersError,
} from "./bus-errors.js";
import { MAX_PAYLOAD_BYTES } from "./contract.js";
import { type HeldMessage, HeldMessages } from "./held-messages.js";
import { toBusMessage } from "./inbound-message.js";
import { describeDenial, type PermissionDenial, PermissionDeniedError } from "./nats-permission-error.js";
import { parseNatsUrl, redactNatsUrl } from "./nats-url.js";
import { isValidPattern, isValidSubject } from "./subjects.js";

/** How to connect to a nats-server. */
export interface NatsBusOptions {
  /** `nats://[user:pass@|token@]host[:port]`, `tls://…`, or a comma-separated list. */
  url: string;
  /** A NATS credentials file (JWT + nkey seed), for hosts running under NATS accounts. */
  credsFile?: string;
  /**
   * The subject prefix of this connection's reply inboxes: requests, JetStream and KV calls all
   * take their replies on `<inboxPrefix>.…`, so a NATS user may be allowed to subscribe to
   * `<inboxPrefix>.>` only. One or more literal tokens, no wildcards.
   * @defaultValue `"_INBOX"`
   */
  inboxPrefix?: string;
  /** Connection name shown by the server's monitoring (`agentloop serve`, `agentloop tail`…). @defaultValue none */
  name?: string;
  /** How long the first connection attempt may take. @defaultValue 5_000 */
  connectTimeoutMs?: number;
  /** Called when a handler throws; delivery goes on. @defaultValue one line on stderr */
  onHandlerError?: HandlerErrorReporter;
  /** Request timeout when the caller gives none. @defaultValue 30_000 */
  defaultRequestTimeoutMs?: number;
  /**
   * Called when the server ends a subscription (e.g. a permission violation under NATS accounts).
   * @defaultValue one line on stderr
   */
  onSubscriptionError?: (error: unknown, subject: string) => void;
  /** Most messages held while disconnected (sent in order once the server is back). @defaultValue 100_000 */
  maxHeldMessages?: number;
  /** Most bytes held while disconnected. @defaultValue 67_108_864 (64 MiB) */
  maxHeldBytes?: number;
  /** One-line notices: connection lost and back (with what was held), dropped publishes. @defaultValue none */
  log?: (line: string) => void;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;
const DEFAULT_MAX_HELD_MESSAGES = 100_000;
const DEFAULT_MAX_HELD_BYTES = 64 * 1024 * 1024;
/** How long a held reply is offered again while its requester has not reconnected yet. */
const REPLY_REDELIVERY_MS = 60_000;
/** How long a reply sent as a probe waits for "no responders" before it counts as delivered. */
const REPLY_PROBE_MS = 2_000;
/** Pause between two attempts (a held reply, or a request whose responders are not back yet). */
const RETRY_INTERVAL_MS = 250;
/** After a reconnect, how long "no responders" may just mean the responders are still reconnecting. */
const RESPONDERS_RECONNECT_MS = 5_000;
/** A subject refused again within this long is counted but not logged again. */
const PERMISSION_LOG_INTERVAL_MS = 10 * 60_000;
/** Subjects remembered as valid (a session's event subjects repeat): the set starts over past this. */
const VALID_SUBJECTS_KEPT = 1_024;

/**
 * The bus on a real nats-server (`@nats-io/transport-node` v3). Reconnects forever once connected;
 * `publish` never throws; `close` drains. `connection` is the underlying client for JetStream
 * (the event log).
 *
 * The client does not keep what is published while it is away (it empties its outbound buffer at
 * every reconnect attempt), so the bus holds publishes and replies itself from the `disconnect`
 * status to the `reconnect` one, in one bounded FIFO, and sends them in order when the connection
 * is back: publishes made after the client reconnected but before its status arrived join the end
 * of the FIFO, so nothing is reordered. A held reply is sent with a reply subject of its own, so
 * the server answers "no responders" while the requester has not resubscribed yet (it reconnects
 * on its own schedule) and the reply is offered again until it is taken. The one window left is
 * the moment between the socket dying and the client noticing: what is written then is lost, as
 * with any core-NATS publish.
 */
export class NatsBus implements Bus {
  readonly kind = "nats" as const;
  /** The NATS connection, for JetStream and KV. */
  readonly connection: NatsConnection;

  private readonly onHandlerError: HandlerErrorReporter;
  private readonly onSubscriptionError: (error: unknown, subject: string) => void;
  private readonly defaultRequestTimeoutMs: number;
  private readonly maxHeldMessages: number;
  private readonly maxHeldBytes: number;
  private readonly log: (line: string) => void;
  /** The server's `max_payload`, kept while disconnected (the client forgets it). */
  private knownMaxPayload: number;
  private droppedCount = 0;
  private closing: Promise<void> | undefined;
  /** Defined while the connection is down: what to send once it is back. */
  private held: HeldMessages | undefined;
  /** When the connection last came back (ms since the epoch). */
  private reconnectedAt = 0;
  private readonly reconnectWaiters = new Set<() => void>();
  /** Subjects already checked: an event publisher hands the bus the same subject string each time. */
  private readonly validSubjects = new Set<string>();
  private permissionErrorCount = 0;
  /** When each denied operation was last logged (`publish x` / `subscription x`): one line per subject. */
  private readonly permissionLoggedAt = new Map<string, number>();
  /** While a start-up check watches, denials go to it instead of being counted and logged. */
  private readonly permissionWatchers = new Set<(denial: PermissionDenial) => void>();
  private readonly hasLog: boolean;
  /** Subjects of the requests waiting for a reply, with how many: their refusal rejects them. */
  private readonly pendingRequestSubjects = new Map<string, number>();

  private constructor(connection: NatsConnection, options: NatsBusOptions) {
    this.connection = connection;
    this.knownMaxPayload = connection.info?.max_payload ?? MAX_PAYLOAD_BYTES;
    this.onHandlerError = options.onHandlerError ?? reportHandlerError;
    this.hasLog = options.log !== undefined;
    // A refused subscription also arrives on the status stream, which logs it when there is a `log`.
    this.onSubscriptionError =
      options.onSubscriptionError ??
      ((error, subject) => {
        if (!(this.hasLog && error instanceof errors.PermissionViolationError)) {
          reportSubscriptionError(error, subject);
        }
      });
    this.defaultRequestTimeoutMs = options.defaultRequestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    this.maxHeldMessages = options.maxHeldMessages ?? DEFAULT_MAX_HELD_MESSAGES;
    this.maxHeldBytes = options.maxHeldBytes ?? DEFAULT_MAX_HELD_BYTES;
    const log = options.log;
    this.log =
      log === undefined
        ? () => {}
        : (line) => {
            try {
              log(line);
            } catch {
              // A failing notice must not stop the bus from holding and sending.
            }
          };
    void this.watchStatus();
  }

  /**
   * Connects to a nats-server, failing if it cannot be reached within `connectTimeoutMs`. Once
   * connected the bus reconnects forever; while the server is away, publishes and replies are held
   * (up to `maxHeldMessages` / `maxHeldBytes`) and sent in order when it is back.
   *
   * @param options The server's URL and, optionally, credentials, inbox prefix and limits.
   * @returns The connected bus; `close()` it when done.
   * @throws BusConfigError for a bad URL, an unreadable credentials file or refused credentials.
   * @throws the NATS client's own error when no server answers within the connect timeout.
   *
   * @example
   * ```ts
   * import { NatsBus } from "agentloop";
   *
   * const bus = await NatsBus.connect({
   *   url: "nats://127.0.0.1:4222",
   *   credsFile: "client.creds", // a NATS user of the client role
   *   inboxPrefix: "_INBOX_client", // replies on _INBOX_client.> only
   *   name: "my-service",
   * });
   * const subscription = bus.subscribe("agentloop.events.*.*.ChatCompleted", (message) => console.log(message.data));
   * // later:
   * subscription.unsubscribe();
   * await bus.close();
   * ```
   */
  static async connect(options: NatsBusOptions): Promise<NatsBus> {
    const connectionOptions = toConnectionOptions(options);
    try {
      return new NatsBus(await connect(connectionOptions), options);
    } catch (error) {
      if (error instanceof errors.AuthorizationError) {
        throw new BusConfigError(
          `the NATS server at ${redactNatsUrl(options.url)} refused the credentials: ${error.message}`,
          { cause: error },
        );
      }
      throw error;
    }
  }

  /**
   * Connects when a server answers at `url` within `timeoutMs`, else returns undefined (so `up`
   * can fall back to the in-process bus). A reachable server that refuses the credentials, a
   * bad URL or a bad credentials file still throw: those are the user's to fix, not a fallback.
   */
  static async tryConnect(
    url: string,
    timeoutMs: number,
    options: Omit<NatsBusOptions, "url" | "connectTimeoutMs"> = {},
  ): Promise<NatsBus | undefined> {
    try {
      return await NatsBus.connect({ ...options, url, connectTimeoutMs: timeoutMs });
    } catch (error) {
      if (error instanceof BusConfigError) throw error;
      return undefined;
    }
  }

  /**
   * Publishes dropped: invalid subject, oversized payload, closed connection, hold buffer full, a
   * held reply whose requester never came back.
   */
  get droppedPublishes(): number {
    return this.droppedCount;
  }

  /**
   * Operations the server refused for lack of permission since connecting (`-ERR 'Permissions
   * Violation for Publish to "x"'` / `Subscription to "x"`), except those a
   * {@link watchPermissionErrors} watcher took. Each subject is also logged, at most once every
   * 10 minutes (to `log`, else stderr).
   */
  get permissionErrors(): number {
    return this.permissionErrorCount;
  }

  /**
   * Hands every permission error to `watcher` (instead of counting and logging it) until the
   * returned function is called: a start-up check that names what is missing reports them itself.
   */
  watchPermissionErrors(watcher: (denial: PermissionDenial) => void): () => void {
    this.permissionWatchers.add(watcher);
    return () => {
      this.permissionWatchers.delete(watcher);
    };
  }

  /** The server's `max_payload` (the last one known while disconnected). */
  get maxPayload(): number {
    return this.knownMaxPayload;
  }

  connectivity(): Connectivity {
    return { isConnected: this.held === undefined, reconnectedAt: this.reconnectedAt };
  }

  /** Messages held right now, waiting for the connection to come back. */
  get heldPublishes(): number {
    return this.held?.size ?? 0;
  }

  publish(subject: string, data: string, headers?: Record<string, string>): void {
    if (!this.isValidSubject(subject)) this.drop(subject, "the subject is not valid");
    else if (this.held === undefined) this.send(subject, data, headers);
    else this.hold(subject, data, headers, false);
  }

  publishBytes(subject: string, data: Uint8Array): void {
    if (!this.isValidSubject(subject)) this.drop(subject, "the subject is not valid");
    else if (this.held === undefined) this.send(subject, data, undefined);
    // Held as text, like every held message (a rare path: the connection is down).
    else
      this.hold(
        subject,
        Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8"),
        undefined,
        false,
      );
  }

  private isValidSubject(subject: string): boolean {
    if (this.validSubjects.has(subject)) return true;
    if (!isValidSubject(subject)) return false;
    if (this.validSubjects.size >= VALID_SUBJECTS_KEPT) this.validSubjects.clear();
    this.validSubjects.add(subject);
    return true;
  }

  subscribe(
    subject: string,
    handler: (message: BusMessage) => void,
    options: SubscribeOptions = {},
  ): Subscription {
    if (!isValidPattern(subject)) throw new InvalidSubjectError(subject);
    if (this.connection.isClosed() || this.connection.isDraining()) throw new BusClosedError();
    const subscription = this.connection.subscribe(subject, {
      ...(options.queue === undefined ? {} : { queue: options.queue }),
      // The client calls this synchronously from its socket reader: a throw here would reach the
      // protocol parser, so every handler error stops at this frame.
      callback: (error, msg) => {
        if (error !== null) {
          try {
            this.onSubscriptionError(error, subject);
          } catch {
            // The reporter itself failed: nothing sensible is left to tell.
          }
          return;
        }
        const message = toBusMessage(msg);
        try {
          handler(message);
        } catch (handlerError) {
          try {
            this.onHandlerError(handlerError, message);
          } catch {
            // The reporter itself failed: nothing sensible is left to tell.
          }
        }
      },
    });
    return {
      unsubscribe: () => {
        try {
          subscription.unsubscribe();
        } catch {
          // Already closed with the connection.
        }
      },
      drain: async () => {
        try {
          await subscription.drain();
        } catch {
          // Already closed with the connection.
        }
      },
    };
  }

  /**
   * Made while the connection is down, a request waits (within its timeout) for it to come back.
   * For a few seconds after a reconnect, "no responders" may only mean the responders are still
   * reconnecting, so the request is sent again while its timeout allows.
   */
  async request(subject: string, data: string, options: RequestOptions = {}): Promise<BusMessage> {
    if (!isValidSubject(subject)) throw new InvalidSubjectError(subject);
    const { signal } = options;
    signal?.throwIfAborted();
    const timeoutMs = options.timeoutMs ?? this.defaultRequestTimeoutMs;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.isClosing()) throw new BusClosedError();
      if (this.held !== undefined && !(await this.untilReconnected(deadline - Date.now(), signal))) {
        throw new BusTimeoutError(subject, timeoutMs, {
          cause: new BusError("the NATS connection did not come back in time"),
        });
      }
      try {
        return await this.requestNow(
          subject,
          data,
          Math.max(1, deadline - Date.now()),
          signal,
          timeoutMs,
          options.headers,
        );
      } catch (error) {
        const now = Date.now();
        const mayBeReconnecting =
          error instanceof NoRespondersError &&
          now - this.reconnectedAt < RESPONDERS_RECONNECT_MS &&
          now + RETRY_INTERVAL_MS < deadline;
        if (!mayBeReconnecting) throw error;
      }
      await pause(RETRY_INTERVAL_MS, signal);
    }
  }

  private requestNow(
    subject: string,
    data: string,
    timeoutMs: number,
    signal: AbortSignal | undefined,
    reportedTimeoutMs = timeoutMs,
    headers?: Record<string, string>,
  ): Promise<BusMessage> {
    signal?.throwIfAborted();
    this.pendingRequestSubjects.set(subject, (this.pendingRequestSubjects.get(subject) ?? 0) + 1);
    const settled = (): void => {
      const pending = (this.pendingRequestSubjects.get(subject) ?? 1) - 1;
      if (pending > 0) this.pendingRequestSubjects.set(subject, pending);
      else this.pendingRequestSubjects.delete(subject);
    };
    const request = this.connection.request(subject, data, {
      timeout: timeoutMs,
      ...(headers === undefined ? {} : { headers: toNatsHeaders(headers) }),
    });
    // Kept until the status stream has had the refusal too: it arrives there after the rejection.
    request.then(settled, () => setImmediate(settled));
    const reply = request.then(toBusMessage, (error: unknown) => {
      const mapped = toBusError(error, subject, reportedTimeoutMs);
      // The client fails open requests with a plain RequestError when the connection closes.
      if (mapped === error && (this.connection.isClosed() || this.connection.isDraining())) {
        throw new BusClosedError("the bus closed before a reply came", { cause: error });
      }
      throw mapped;
    });
    if (signal === undefined) return reply;
    // The client has no abort for requests: stop waiting and let the late reply be ignored.
    reply.catch(() => {});
    return new Promise<BusMessage>((resolve, reject) => {
      const onAbort = (): void => reject(signal.reason);
      signal.addEventListener("abort", onAbort, { once: true });
      reply.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
    });
  }

  respond(message: BusMessage, data: string): void {
    if (message.reply === undefined) return;
    if (this.held === undefined) this.publish(message.reply, data);
    else this.hold(message.reply, data, undefined, true);
  }

  /** While disconnected, resolves at once: what is held goes out on reconnect (or is reported at close). */
  async flush(): Promise<void> {
    if (this.connection.isClosed() || this.held !== undefined) return;
    try {
      await this.connection.flush();
    } catch (error) {
      if (!this.connection.isClosed()) throw error;
    }
  }

  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    this.wakeReconnectWaiters();
    if (this.connection.isClosed()) return;
    if (this.connection.isDraining()) {
      await this.connection.closed();
      return;
    }
    if (this.held === undefined) {
      await this.connection.drain();
      return;
    }
    // Draining waits for a server that is not there: close, and say what could not be sent.
    const unsent = this.held.takeAll().length;
    if (unsent > 0) {
      this.droppedCount += unsent;
      this.log(`closing while NATS is unreachable: ${plural(unsent, "held message")} could not be sent`);
    }
    await this.connection.close();
    this.held = undefined;
  }

  private isClosing(): boolean {
    return this.closing !== undefined || this.connection.isClosed() || this.connection.isDraining();
  }

  /** Publishes now; false (counted and logged) when the client refuses. */
  private send(
    subject: string,
    data: string | Uint8Array,
    headers: Record<string, string> | undefined,
  ): boolean {
    try {
      // Encoded here from Node's shared buffer pool: the client's own encoding allocates a fresh
      // ArrayBuffer per message, the largest per-publish cost after the socket write.
      const payload = typeof data === "string" ? Buffer.from(data, "utf8") : data;
      if (headers === undefined) this.connection.publish(subject, payload);
      else this.connection.publish(subject, payload, { headers: toNatsHeaders(headers) });
      return true;
    } catch (error) {
      // Best-effort by contract (closed, draining, payload over max_payload): count, never throw.
      this.drop(subject, this.describeRefusal(error, data));
      return false;
    }
  }

  private hold(
    subject: string,
    data: string,
    headers: Record<string, string> | undefined,
    isReply: boolean,
  ): void {
    const held = this.held;
    if (held === undefined || this.closing !== undefined) {
      this.drop(subject, "the bus is closed");
      return;
    }
    const bytes = Buffer.byteLength(data, "utf8");
    if (bytes > this.maxPayload) {
      this.drop(subject, tooLarge(bytes, this.maxPayload));
      return;
    }
    const message: HeldMessage = { subject, data, isReply, bytes };
    if (headers !== undefined) message.headers = headers;
    if (held.add(message)) return;
    this.droppedCount++;
    if (held.dropped === 1) {
      this.log(
        `the hold buffer is full (${plural(held.maxMessages, "message")} / ${mebibytes(held.maxBytes)}): events are dropped until NATS is back`,
      );
    }
  }

  private drop(subject: string, reason: string): void {
    this.droppedCount++;
    this.log(`dropped a message on ${subject}: ${reason}`);
  }

  private describeRefusal(error: unknown, data: string | Uint8Array): string {
    if (this.connection.isClosed() || this.connection.isDraining()) return "the bus is closed";
    const bytes = typeof data === "string" ? Buffer.byteLength(data, "utf8") : data.byteLength;
    if (bytes > this.maxPayload) return tooLarge(bytes, this.maxPayload);
    return describeError(error);
  }

  private async watchStatus(): Promise<void> {
    try {
      for await (const status of this.connection.status()) {
        if (status.type === "disconnect") this.onDisconnect(status.server);
        else if (status.type === "reconnect") this.onReconnect(status.server);
        else if (status.type === "error" && status.error instanceof errors.PermissionViolationError) {
          this.onPermissionError(status.error);
        }
      }
    } catch {
      // The status stream ends with the connection.
    }
  }

  private onPermissionError(error: InstanceType<typeof errors.PermissionViolationError>): void {
    const denial: PermissionDenial = { operation: error.operation, subject: error.subject };
    if (error.queue !== undefined) denial.queue = error.queue;
    if (this.permissionWatchers.size > 0) {
      for (const watcher of this.permissionWatchers) watcher(denial);
      return;
    }
    this.permissionErrorCount++;
    const key = `${denial.operation} ${denial.subject}`;
    const now = Date.now();
    const loggedAt = this.permissionLoggedAt.get(key);
    if (loggedAt !== undefined && now - loggedAt < PERMISSION_LOG_INTERVAL_MS) return;
    if (this.permissionLoggedAt.size >= VALID_SUBJECTS_KEPT) this.permissionLoggedAt.clear();
    this.permissionLoggedAt.set(key, now);
    const line = `the NATS server refused: ${describeDenial(denial)} (permission errors so far: ${this.permissionErrorCount}; the same subject is not logged again for ${PERMISSION_LOG_INTERVAL_MS / 60_000} min)`;
    if (this.hasLog) this.log(line);
    // Without a `log`, a refused subscription made here is the subscription's to report
    // (`onSubscriptionError`), a refused request rejects with a PermissionDeniedError, and a
    // refused publish has no one else to tell.
    else if (denial.operation === "publish" && !this.pendingRequestSubjects.has(denial.subject)) {
      console.error(`agentloop bus: ${line}`);
    }
  }

  private onDisconnect(server: string): void {
    if (this.held !== undefined || this.closing !== undefined) return;
    this.held = new HeldMessages(this.maxHeldMessages, this.maxHeldBytes);
    this.log(
      `lost the NATS connection to ${server}; holding replies and events until it is back (up to ${plural(this.maxHeldMessages, "message")} / ${mebibytes(this.maxHeldBytes)})`,
    );
  }

  /**
   * Sends what was held, in order, in this one synchronous pass: publishes made meanwhile wait in
   * the FIFO until it is empty, so they cannot overtake it.
   */
  private onReconnect(server: string): void {
    const held = this.held;
    if (held === undefined) return;
    this.knownMaxPayload = this.connection.info?.max_payload ?? this.knownMaxPayload;
    this.reconnectedAt = Date.now();
    const overflowed = held.dropped;
    const messages = held.takeAll();
    this.held = undefined;
    let sent = 0;
    for (const message of messages) {
      if (message.isReply) {
        void this.redeliverReply(message);
        sent++;
      } else if (this.send(message.subject, message.data, message.headers)) sent++;
    }
    const dropped = overflowed === 0 ? "" : `; ${overflowed} more were dropped (the hold buffer was full)`;
    this.log(`reconnected to NATS at ${server}; sent ${plural(sent, "held message")}${dropped}`);
    this.wakeReconnectWaiters();
  }

  /**
   * Sends a held reply with a reply subject of its own: when its requester has not resubscribed
   * yet, the server answers "no responders" and the reply is offered again a moment later. No
   * answer at all means someone received it (nobody answers a reply).
   */
  private async redeliverReply(message: HeldMessage): Promise<void> {
    const deadline = Date.now() + REPLY_REDELIVERY_MS;
    for (;;) {
      if (this.held !== undefined) {
        // Down again: it waits for the next reconnect with the rest.
        this.held.add(message);
        return;
      }
      try {
        await this.connection.request(message.subject, message.data, { timeout: REPLY_PROBE_MS });
        return;
      } catch (error) {
        const mapped = toBusError(error, message.subject, REPLY_PROBE_MS);
        if (mapped instanceof BusClosedError) {
          this.drop(message.subject, "the bus closed before the reply could be sent");
          return;
        }
        if (!(mapped instanceof NoRespondersError)) return;
      }
      if (this.closing !== undefined || Date.now() + RETRY_INTERVAL_MS > deadline) {
        this.drop(
          message.subject,
          `nobody took the reply within ${REPLY_REDELIVERY_MS / 1000} s of the reconnect (its requester did not come back)`,
        );
        return;
      }
      await pause(RETRY_INTERVAL_MS);
    }
  }

  /** Resolves true once the connection is back, false after `timeoutMs`; BusClosedError on close. */
  private untilReconnected(timeoutMs: number, signal: AbortSignal | undefined): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const finish = (): void => {
        clearTimeout(timer);
        this.reconnectWaiters.delete(wake);
        signal?.removeEventListener("abort", onAbort);
      };
      const wake = (): void => {
        finish();
        if (this.isClosing()) reject(new BusClosedError());
        else resolve(true);
      };
      const onAbort = (): void => {
        finish();
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        finish();
        resolve(false);
      }, timeoutMs);
      this.reconnectWaiters.add(wake);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  private wakeReconnectWaiters(): void {
    for (const wake of [...this.reconnectWaiters]) wake();
  }
}

function tooLarge(bytes: number, maxPayload: number): string {
  return `${bytes} bytes is over the server's max_payload of ${maxPayload} bytes`;
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

function mebibytes(bytes: number): string {
  return `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MiB`;
}

function reportSubscriptionError(error: unknown, subject: string): void {
  const text = describeError(error);
  console.error(`agentloop bus: the NATS subscription to ${subject} failed: ${text}`);
}

/**
 * The NATS client's options for `options` (servers, auth, TLS, credentials, inbox prefix): what a
 * second connection to the same system (the host lease's thread) is opened with.
 * @throws BusConfigError for a bad URL or inbox prefix, or an unreadable credentials file.
 */
export function toConnectionOptions(options: NatsBusOptions): NodeConnectionOptions {
  const address = parseNatsUrl(options.url);
  const connectionOptions: NodeConnectionOptions = {
    servers: address.servers,
    timeout: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    // A host must outlive a nats-server restart: keep trying (the bus holds what is published meanwhile).
    maxReconnectAttempts: -1,
    // Replies to our own requests and the UI's view of our own events arrive on this connection.
    noEcho: false,
    // No stack captured ahead of every request (a RequestError and a TimeoutError, most never
    // thrown): a host makes several JetStream requests per chat, and those two were ~4 % of its
    // CPU and more of its garbage. A failed request still throws the same error classes.
    noAsyncTraces: true,
  };
  if (options.name !== undefined) connectionOptions.name = options.name;
  if (options.inboxPrefix !== undefined) {
    if (!isValidSubject(options.inboxPrefix)) {
      throw new BusConfigError(
        `the inbox prefix must be literal subject tokens (no wildcards or whitespace), got "${options.inboxPrefix}"`,
      );
    }
    connectionOptions.inboxPrefix = options.inboxPrefix;
  }
  if (address.user !== undefined) connectionOptions.user = address.user;
  if (address.pass !== undefined) connectionOptions.pass = address.pass;
  if (address.token !== undefined) connectionOptions.token = address.token;
  if (address.tls) connectionOptions.tls = {};
  if (options.credsFile !== undefined) connectionOptions.authenticator = readCreds(options.credsFile);
  return connectionOptions;
}

function readCreds(path: string): Authenticator {
  let contents: Uint8Array;
  try {
    contents = new Uint8Array(readFileSync(path));
  } catch (error) {
    const reason = describeError(error);
    throw new BusConfigError(`cannot read the NATS credentials file ${path}: ${reason}`, { cause: error });
  }
  const authenticator = credsAuthenticator(contents);
  // The client parses the file only during the handshake, and fails it with a plain Error that
  // looks like an unreachable server (so `up` would fall back to its in-process bus): parse it now.
  try {
    authenticator(undefined);
  } catch (error) {
    const reason = describeError(error);
    throw new BusConfigError(`the NATS credentials file ${path} is not usable: ${reason}`, { cause: error });
  }
  return authenticator;
}

function toNatsHeaders(record: Record<string, string>): ReturnType<typeof createHeaders> {
  const natsHeaders = createHeaders();
  for (const key of Object.keys(record)) natsHeaders.set(key, record[key]!);
  return natsHeaders;
}

function toBusError(error: unknown, subject: string, timeoutMs: number): unknown {
  const refused = permissionViolationIn(error);
  if (refused !== undefined) {
    const denial: PermissionDenial = { operation: refused.operation, subject: refused.subject };
    return new PermissionDeniedError(denial, { cause: error });
  }
  if (error instanceof errors.TimeoutError) return new BusTimeoutError(subject, timeoutMs, { cause: error });
  if (error instanceof errors.NoRespondersError) return new NoRespondersError(subject, { cause: error });
  if (error instanceof errors.RequestError) {
    if (error.isNoResponders()) return new NoRespondersError(subject, { cause: error });
    if (error.cause instanceof errors.TimeoutError) {
      return new BusTimeoutError(subject, timeoutMs, { cause: error });
    }
  }
  if (error instanceof errors.ClosedConnectionError || error instanceof errors.DrainingConnectionError) {
    return new BusClosedError(undefined, { cause: error });
  }
  return error;
}

/** The server's permission refusal behind a failed request (the client wraps it in a RequestError). */
function permissionViolationIn(
  error: unknown,
): InstanceType<typeof errors.PermissionViolationError> | undefined {
  if (error instanceof errors.PermissionViolationError) return error;
  if (error instanceof Error && error.cause instanceof errors.PermissionViolationError) return error.cause;
  return undefined;
}
