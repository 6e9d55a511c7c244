import { headers as createHeaders, errors, type NatsConnection } from "@nats-io/transport-node";
import { CallerGoneError } from "./caller-gone-error.js";
import { ACK_CHUNK, type ProtocolErrorStatus } from "./stream-chunks.js";
import { ERROR_CODE_HEADER, ERROR_HEADER } from "./wire.js";

/** How long a liveness probe waits: a gone caller is told by the server's no-responders status at once. */
const PROBE_TIMEOUT_MS = 1_000;

export interface PromptStreamOptions {
  connection: NatsConnection;
  /** The request's reply subject: every chunk goes there. */
  replySubject: string;
  /** How often an `ack` keep-alive goes out while the chat runs (default 10 s). */
  keepAliveMs: number;
  /** A refusal: no `ack`, no keep-alives, only {@link PromptStream.fail}. */
  silent?: boolean;
  timers?: { setInterval(callback: () => void, ms: number): unknown; clearInterval(handle: unknown): void };
}

/**
 * One streamed prompt reply (§6) on its reply subject: the `ack` first, `ack` keep-alives, the
 * content chunks, then the terminator (after an error message, §9, when it failed).
 *
 * Cancellation (§6: "the caller unsubscribes"): the protocol has no cancel message, so every
 * `ack` is published as a request. While the caller listens on its reply subject the probe simply
 * arrives as one more `ack` (its own reply subject is ignored by callers); once nobody listens, the
 * server answers the probe with its no-responders status and {@link signal} aborts, which stops
 * the chat's model request. A caller is noticed gone within one keep-alive interval.
 */
export class PromptStream {
  readonly #connection: NatsConnection;
  readonly #replySubject: string;
  readonly #controller = new AbortController();
  readonly #timers: NonNullable<PromptStreamOptions["timers"]>;
  readonly #probeTimeoutMs: number;
  #ticker: unknown;
  #isProbing = false;
  #isEnded = false;

  constructor(options: PromptStreamOptions) {
    this.#connection = options.connection;
    this.#replySubject = options.replySubject;
    this.#probeTimeoutMs = Math.max(1, Math.min(PROBE_TIMEOUT_MS, options.keepAliveMs));
    this.#timers = options.timers ?? {
      setInterval: (callback, ms) => setInterval(callback, ms).unref(),
      clearInterval: (handle) => clearInterval(handle as NodeJS.Timeout),
    };
    if (options.silent) return;
    this.#probe();
    this.#ticker = this.#timers.setInterval(() => this.#probe(), options.keepAliveMs);
  }

  /** Aborts, with a {@link CallerGoneError}, when the caller went away (unsubscribed from its reply subject). */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Publishes one chunk (a JSON string). */
  send(chunk: string): void {
    if (this.#isEnded) return;
    this.#publish(chunk);
  }

  /** The empty terminator: the stream is complete. */
  end(): void {
    if (this.#isEnded) return;
    this.#stop();
    this.#publish("");
  }

  /** An error message (§9 headers, our error as a JSON body), then the terminator. */
  fail(status: ProtocolErrorStatus, code: string, description: string): void {
    if (this.#isEnded) return;
    this.#stop();
    const headers = createHeaders();
    headers.set(ERROR_CODE_HEADER, String(status));
    // A header value is one line.
    headers.set(ERROR_HEADER, description.replace(/[\r\n]+/g, " "));
    this.#publish(JSON.stringify({ code, message: description }), headers);
    this.#publish("");
  }

  #stop(): void {
    this.#isEnded = true;
    if (this.#ticker !== undefined) this.#timers.clearInterval(this.#ticker);
  }

  #publish(data: string, headers?: ReturnType<typeof createHeaders>): void {
    try {
      this.#connection.publish(this.#replySubject, data, headers === undefined ? undefined : { headers });
    } catch {
      // The connection is closing: the caller's inactivity timer tells it.
    }
  }

  #probe(): void {
    if (this.#isEnded || this.#isProbing) return;
    this.#isProbing = true;
    let request: Promise<unknown>;
    try {
      request = this.#connection.request(this.#replySubject, ACK_CHUNK, { timeout: this.#probeTimeoutMs });
    } catch {
      this.#isProbing = false;
      return;
    }
    request
      .then(
        () => {},
        (error: unknown) => {
          if (isNoResponders(error) && !this.#isEnded) {
            this.#controller.abort(new CallerGoneError(this.#replySubject));
          }
        },
      )
      .finally(() => {
        this.#isProbing = false;
      });
  }
}

function isNoResponders(error: unknown): boolean {
  if (error instanceof errors.NoRespondersError) return true;
  return error instanceof errors.RequestError && error.isNoResponders();
}
