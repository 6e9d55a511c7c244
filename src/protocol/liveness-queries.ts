import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { createConnectionInbox } from "../bus/connection-inbox.js";

/** How long a caller has to answer a liveness question, by default. */
export const DEFAULT_LIVENESS_REPLY_MS = 60_000;

/** The question a caller is asked; any answer keeps the chat running. */
export const LIVENESS_PROMPT =
  "Still waiting for this answer? Reply anything to keep the chat running; without a reply it is stopped.";

export interface LivenessQueriesOptions {
  connection: NatsConnection;
  /** Publishes one chunk on the prompt's reply stream. */
  send: (chunk: string) => void;
  /** A question after the chat ran this long, and again this long after each answer. */
  everyMs: number;
  /** How long the caller has to answer (default 60 s). */
  replyMs?: number;
  /** Query ids (default: `liveness-1`, `liveness-2`…). */
  createId?: () => string;
  timers?: {
    setTimeout(callback: () => void, ms: number): unknown;
    clearTimeout(handle: unknown): void;
  };
}

/**
 * Cancellation for callers that stay connected. The Agent Protocol has no cancel message: a caller
 * cancels by dropping its reply subscription, which a host notices only when the subject loses its
 * last subscriber. The official clients stream every prompt on their connection's one shared reply
 * inbox, so the subject never loses its subscriber and the chat would run to its end for nobody.
 * The spec's own answer (§6.7, §7.3) is a mid-stream query as a liveness check: after
 * {@link LivenessQueriesOptions.everyMs} of running, the caller is asked a `query`; an answer (any)
 * keeps the chat going until the next question, none within `replyMs` aborts {@link signal}, which
 * stops the chat (the stream ends with 409 `cancelled`, §7.3 option a).
 */
export class LivenessQueries {
  readonly #options: LivenessQueriesOptions;
  readonly #controller = new AbortController();
  readonly #timers: NonNullable<LivenessQueriesOptions["timers"]>;
  readonly #replyMs: number;
  #count = 0;
  #timer: unknown;
  #subscription: Subscription | undefined;
  #isClosed = false;

  constructor(options: LivenessQueriesOptions) {
    this.#options = options;
    this.#replyMs = options.replyMs ?? DEFAULT_LIVENESS_REPLY_MS;
    this.#timers = options.timers ?? {
      setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
      clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
    };
    this.#schedule(options.everyMs, () => this.#ask());
  }

  /** Aborts when a question went unanswered: the caller is gone. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Asks no more (the chat ended). */
  close(): void {
    this.#isClosed = true;
    this.#timers.clearTimeout(this.#timer);
    this.#subscription?.unsubscribe();
    this.#subscription = undefined;
  }

  #schedule(ms: number, then: () => void): void {
    this.#timers.clearTimeout(this.#timer);
    this.#timer = this.#timers.setTimeout(then, ms);
  }

  #ask(): void {
    if (this.#isClosed) return;
    this.#count += 1;
    const id = this.#options.createId?.() ?? `liveness-${this.#count}`;
    const replySubject = createConnectionInbox(this.#options.connection);
    try {
      this.#subscription = this.#options.connection.subscribe(replySubject, {
        max: 1,
        callback: () => {
          this.#subscription = undefined;
          if (!this.#isClosed) this.#schedule(this.#options.everyMs, () => this.#ask());
        },
      });
    } catch {
      return; // The connection is closing: the chat ends with it.
    }
    this.#options.send(
      JSON.stringify({ type: "query", data: { id, reply_subject: replySubject, prompt: LIVENESS_PROMPT } }),
    );
    this.#schedule(this.#replyMs, () => {
      if (this.#isClosed || this.#subscription === undefined) return;
      this.close();
      this.#controller.abort(
        new Error(
          `the caller did not answer the liveness question within ${Math.round(this.#replyMs / 1000)} s`,
        ),
      );
    });
  }
}
