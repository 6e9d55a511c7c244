import { readFileSync } from "node:fs";
import {
  type Authenticator,
  connect,
  headers as createHeaders,
  credsAuthenticator,
  errors,
  type Msg,
  type NatsConnection,
  type NodeConnectionOptions,
} from "@nats-io/transport-node";
import type { Bus, BusMessage, RequestOptions, SubscribeOptions, Subscription } from "./bus.js";
import { DEFAULT_REQUEST_TIMEOUT_MS, type HandlerErrorReporter, reportHandlerError } from "./bus-defaults.js";
import {
  BusClosedError,
  BusConfigError,
  BusTimeoutError,
  InvalidSubjectError,
  NoRespondersError,
} from "./bus-errors.js";
import { parseNatsUrl, redactNatsUrl } from "./nats-url.js";
import { isValidPattern, isValidSubject } from "./subjects.js";

/** How to connect to a nats-server. */
export interface NatsBusOptions {
  /** `nats://[user:pass@|token@]host[:port]`, `tls://…`, or a comma-separated list. */
  url: string;
  /** A NATS credentials file (JWT + nkey seed), for hosts running under NATS accounts. */
  credsFile?: string;
  /** Connection name shown by the server's monitoring (`agentloop serve`, `agentloop tail`…). */
  name?: string;
  /** How long the first connection attempt may take (default 5 s). */
  connectTimeoutMs?: number;
  /** Called when a handler throws; delivery goes on. Default: one stderr line. */
  onHandlerError?: HandlerErrorReporter;
  /** Request timeout when the caller gives none (default 30 s). */
  defaultRequestTimeoutMs?: number;
  /**
   * Called when the server ends a subscription (e.g. a permission violation under NATS accounts).
   * Default: one stderr line.
   */
  onSubscriptionError?: (error: unknown, subject: string) => void;
}

const DEFAULT_CONNECT_TIMEOUT_MS = 5_000;

/**
 * The bus on a real nats-server (`@nats-io/transport-node` v3). Reconnects forever once connected
 * (the client buffers publishes while it is away); `publish` never throws; `close` drains.
 * `connection` is the underlying client for JetStream (the event log).
 */
export class NatsBus implements Bus {
  readonly kind = "nats" as const;
  /** The NATS connection, for JetStream and KV. */
  readonly connection: NatsConnection;

  private readonly onHandlerError: HandlerErrorReporter;
  private readonly onSubscriptionError: (error: unknown, subject: string) => void;
  private readonly defaultRequestTimeoutMs: number;
  private droppedCount = 0;
  private closing: Promise<void> | undefined;

  private constructor(connection: NatsConnection, options: NatsBusOptions) {
    this.connection = connection;
    this.onHandlerError = options.onHandlerError ?? reportHandlerError;
    this.onSubscriptionError = options.onSubscriptionError ?? reportSubscriptionError;
    this.defaultRequestTimeoutMs = options.defaultRequestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  }

  /**
   * Connects, failing if the server cannot be reached within the connect timeout.
   * @throws BusConfigError for a bad URL, an unreadable credentials file or refused credentials.
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

  /** Publishes dropped: invalid subject, oversized payload, closed connection. */
  get droppedPublishes(): number {
    return this.droppedCount;
  }

  publish(subject: string, data: string, headers?: Record<string, string>): void {
    if (!isValidSubject(subject)) {
      this.droppedCount++;
      return;
    }
    try {
      if (headers === undefined) this.connection.publish(subject, data);
      else this.connection.publish(subject, data, { headers: toNatsHeaders(headers) });
    } catch {
      // Best-effort by contract (closed, draining, payload over max_payload): count, never throw.
      this.droppedCount++;
    }
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
    };
  }

  async request(subject: string, data: string, options: RequestOptions = {}): Promise<BusMessage> {
    if (!isValidSubject(subject)) throw new InvalidSubjectError(subject);
    const { signal } = options;
    signal?.throwIfAborted();
    if (this.connection.isClosed() || this.connection.isDraining()) throw new BusClosedError();
    const timeoutMs = options.timeoutMs ?? this.defaultRequestTimeoutMs;
    const reply = this.connection
      .request(subject, data, { timeout: timeoutMs })
      .then(toBusMessage, (error: unknown) => {
        const mapped = toBusError(error, subject, timeoutMs);
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
    if (message.reply !== undefined) this.publish(message.reply, data);
  }

  async flush(): Promise<void> {
    if (this.connection.isClosed()) return;
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
    if (this.connection.isClosed()) return;
    if (this.connection.isDraining()) {
      await this.connection.closed();
      return;
    }
    await this.connection.drain();
  }
}

function reportSubscriptionError(error: unknown, subject: string): void {
  const text = error instanceof Error ? error.message : String(error);
  console.error(`agentloop bus: the NATS subscription to ${subject} failed: ${text}`);
}

function toConnectionOptions(options: NatsBusOptions): NodeConnectionOptions {
  const address = parseNatsUrl(options.url);
  const connectionOptions: NodeConnectionOptions = {
    servers: address.servers,
    timeout: options.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    // A host must outlive a nats-server restart: keep trying, buffer meanwhile.
    maxReconnectAttempts: -1,
    // Replies to our own requests and the UI's view of our own events arrive on this connection.
    noEcho: false,
  };
  if (options.name !== undefined) connectionOptions.name = options.name;
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
    const reason = error instanceof Error ? error.message : String(error);
    throw new BusConfigError(`cannot read the NATS credentials file ${path}: ${reason}`, { cause: error });
  }
  const authenticator = credsAuthenticator(contents);
  // The client parses the file only during the handshake, and fails it with a plain Error that
  // looks like an unreachable server (so `up` would fall back to its in-process bus): parse it now.
  try {
    authenticator(undefined);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new BusConfigError(`the NATS credentials file ${path} is not usable: ${reason}`, { cause: error });
  }
  return authenticator;
}

function toNatsHeaders(record: Record<string, string>): ReturnType<typeof createHeaders> {
  const natsHeaders = createHeaders();
  for (const key of Object.keys(record)) natsHeaders.set(key, record[key]!);
  return natsHeaders;
}

function toBusMessage(msg: Msg): BusMessage {
  const message: BusMessage = { subject: msg.subject, data: msg.string() };
  if (msg.reply) message.reply = msg.reply;
  if (msg.headers !== undefined) {
    const record: Record<string, string> = {};
    // Keys as sent (the v3 client's lookups are case-sensitive): no canonicalisation here.
    for (const key of msg.headers.keys()) record[key] = msg.headers.get(key);
    message.headers = record;
  }
  return message;
}

function toBusError(error: unknown, subject: string, timeoutMs: number): unknown {
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
