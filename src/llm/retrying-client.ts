import { describeError } from "../errors/describe-error.js";
import { abortableSleep, cancelledBy, throwIfAborted } from "./abortable-sleep.js";
import { CancelledError, isLlmError, type LlmError, NetworkError, StrayToolMarkupError } from "./errors.js";
import type { LlmClient } from "./llm-client.js";
import { findStrayToolMarkup, mayHoldToolMarkup } from "./stray-tool-markup.js";
import type {
  BackendSink,
  GenerateRequest,
  GenerateResponse,
  LlmBackend,
  LlmOptions,
  StreamSink,
} from "./types.js";
import { canCallTools } from "./types.js";

/** What {@link RetryingLlmClientOptions.onRetry} learns before each retry. */
export interface RetryInfo {
  /** The attempt that failed, 1-based. */
  attempt: number;
  maxAttempts: number;
  /** The backoff before the next attempt (0 for the stray-markup retry of `generate`). */
  delayMs: number;
  error: LlmError;
  streaming: boolean;
  /** False for the one extra stray-markup retry of `generate`, which does not use up an attempt. */
  counted: boolean;
  provider: string;
}

/** The backend to call and how to retry it. */
export interface RetryingLlmClientOptions {
  /** The backend requests go to (`createBackend`, or your own `LlmBackend`). */
  backend: LlmBackend;
  /** Attempts per request, the first included. @defaultValue 3 */
  maxAttempts?: number;
  /** Backoff before the second attempt; it doubles each time. @defaultValue 1_000 */
  initialDelayMs?: number;
  /** Cap on any backoff, the server's retry-after included. @defaultValue 30_000 */
  maxDelayMs?: number;
  /** Injected for tests. Must reject when `signal` aborts (the client also races it). @defaultValue a real timer */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Observability hook called before each retry; its exceptions are swallowed. @defaultValue none */
  onRetry?: (info: RetryInfo) => void;
}

/**
 * The {@link LlmClient} the loop uses: retries, stream resets and stray tool-markup checks in front
 * of one swappable {@link LlmBackend}.
 *
 * Errors a backend throws that are not {@link LlmError}s are wrapped as {@link NetworkError}
 * (retryable), keeping the original as `cause`: backends map every provider and HTTP failure
 * themselves, so what escapes unmapped comes from below them (undici's `TypeError: fetch failed`,
 * a socket error with a `code`). Whatever the error, once the request's signal has aborted it
 * becomes a {@link CancelledError}. Before each attempt the request's `beforeAttempt` runs; what it
 * throws (a lost lease) ends the request as it is.
 *
 * @example
 * ```ts
 * import { createAgent, createBackend, RetryingLlmClient } from "agentloop";
 *
 * const llm = new RetryingLlmClient({
 *   backend: createBackend({ provider: "openai-responses" }, process.env),
 *   maxAttempts: 5,
 *   onRetry: ({ attempt, delayMs, error }) => console.warn(`attempt ${attempt} failed (${error.code}); retry in ${delayMs} ms`),
 * });
 * const agent = await createAgent({ llm, model: "gpt-5-mini" });
 * ```
 */
export class RetryingLlmClient implements LlmClient {
  #backend: LlmBackend;
  readonly #maxAttempts: number;
  readonly #initialDelayMs: number;
  readonly #maxDelayMs: number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly #onRetry: ((info: RetryInfo) => void) | undefined;

  constructor(options: RetryingLlmClientOptions) {
    const maxAttempts = options.maxAttempts ?? 3;
    if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
      throw new RangeError(`maxAttempts must be a positive integer, got ${maxAttempts}`);
    }
    this.#backend = options.backend;
    this.#maxAttempts = maxAttempts;
    this.#initialDelayMs = options.initialDelayMs ?? 1000;
    this.#maxDelayMs = options.maxDelayMs ?? 30_000;
    this.#sleep = options.sleep ?? abortableSleep;
    this.#onRetry = options.onRetry;
  }

  get backend(): LlmBackend {
    return this.#backend;
  }

  setBackend(backend: LlmBackend): void {
    this.#backend = backend;
  }

  /**
   * Non-streaming generation. Retryable errors are retried up to `maxAttempts` attempts in all.
   * When tools were offered and the answer holds stray tool markup, the request is repeated once
   * without using up an attempt; markup in that repeat is thrown as a {@link StrayToolMarkupError}.
   */
  async generate(request: GenerateRequest): Promise<GenerateResponse> {
    const backend = this.#backend;
    const { signal } = request;
    let attempt = 1;
    let strayRetried = false;
    for (;;) {
      throwIfAborted(signal);
      request.beforeAttempt?.();
      let outcome: { response: GenerateResponse } | { error: LlmError };
      try {
        outcome = { response: await raceAbort(backend.generate(request), signal) };
      } catch (thrown) {
        outcome = { error: toLlmError(thrown, signal) };
      }
      if ("response" in outcome) {
        const markup = strayMarkupIn(outcome.response, request.options);
        if (markup === undefined) return outcome.response;
        const error = strayMarkupError(markup);
        if (strayRetried) throw error;
        strayRetried = true;
        this.#notify({ attempt, delayMs: 0, error, streaming: false, counted: false, backend });
        continue;
      }
      const { error } = outcome;
      if (!error.retryable || attempt >= this.#maxAttempts) throw error;
      const delayMs = this.#backoff(error, attempt);
      this.#notify({ attempt, delayMs, error, streaming: false, counted: true, backend });
      await this.#wait(delayMs, signal);
      attempt += 1;
    }
  }

  /**
   * Streaming generation with reset semantics. Deltas go to the sink as they come. A retryable
   * failure (stray markup found on completion included) calls `sink.onReset(error.code, error)` at
   * once, so a UI drops the dead segment while the backoff runs, then re-opens the stream; a final
   * failure is thrown without `onReset`. `onCompleted` is called once, last.
   */
  async generateStream(request: GenerateRequest, sink: StreamSink): Promise<GenerateResponse> {
    const backend = this.#backend;
    const { signal } = request;
    let attempt = 1;
    for (;;) {
      throwIfAborted(signal);
      request.beforeAttempt?.();
      const attemptSink = new AttemptSink(sink);
      let response: GenerateResponse;
      try {
        response = await raceAbort(backend.generateStream(request, attemptSink), signal);
        attemptSink.close();
        const markup = strayMarkupIn(response, request.options);
        if (markup !== undefined) throw strayMarkupError(markup);
      } catch (thrown) {
        attemptSink.close();
        // The caller's own sink failed: that is not the provider's fault, so it is never retried.
        if (attemptSink.failure) throw attemptSink.failure.error;
        const error = toLlmError(thrown, signal);
        if (!error.retryable || attempt >= this.#maxAttempts) throw error;
        const delayMs = this.#backoff(error, attempt);
        this.#notify({ attempt, delayMs, error, streaming: true, counted: true, backend });
        sink.onReset(error.code, error);
        await this.#wait(delayMs, signal);
        attempt += 1;
        continue;
      }
      sink.onCompleted(response, response.usage);
      return response;
    }
  }

  /** The error's retry-after if it has one, else exponential; both capped. */
  #backoff(error: LlmError, attempt: number): number {
    const delay = error.retryAfterMs ?? this.#initialDelayMs * 2 ** (attempt - 1);
    return Math.max(0, Math.min(this.#maxDelayMs, delay));
  }

  async #wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
    try {
      await raceAbort(this.#sleep(ms, signal), signal);
    } catch (error) {
      throw toLlmError(error, signal);
    }
  }

  #notify(info: Omit<RetryInfo, "maxAttempts" | "provider"> & { backend: LlmBackend }): void {
    if (!this.#onRetry) return;
    const { backend, ...rest } = info;
    try {
      this.#onRetry({ ...rest, maxAttempts: this.#maxAttempts, provider: backend.provider });
    } catch {
      // A logging hook must not change the outcome of a request.
    }
  }
}

/**
 * The sink one attempt streams into. It stops forwarding once the attempt is over (a backend that
 * ignores the abort could still emit), and remembers a failure of the caller's sink so it is
 * rethrown as it is instead of being mistaken for a provider error.
 */
class AttemptSink implements BackendSink {
  #open = true;
  failure: { error: unknown } | undefined;

  constructor(readonly target: StreamSink) {}

  // Each delta is forwarded in place, with no closure per delta (a response streams dozens).
  onTextDelta(text: string): void {
    if (!this.#open) return;
    try {
      this.target.onTextDelta(text);
    } catch (error) {
      this.#fail(error);
    }
  }

  onReasoningDelta(text: string): void {
    if (!this.#open) return;
    try {
      this.target.onReasoningDelta(text);
    } catch (error) {
      this.#fail(error);
    }
  }

  close(): void {
    this.#open = false;
  }

  #fail(error: unknown): never {
    this.failure ??= { error };
    throw error;
  }
}

function strayMarkupIn(response: GenerateResponse, options: LlmOptions): string | undefined {
  // Most answers hold nothing that looks like markup: no tool names to list for them.
  if (!canCallTools(options) || !mayHoldToolMarkup(response.content)) return undefined;
  const toolNames = (options.tools ?? []).map((tool) => tool.name);
  return findStrayToolMarkup(response.content, toolNames);
}

function strayMarkupError(markup: string): StrayToolMarkupError {
  return new StrayToolMarkupError(`The model wrote a tool call as text: ${markup}`);
}

/** Settles with `promise`, or rejects with a CancelledError the moment `signal` aborts. */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(cancelledBy(signal));
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/** Normalises anything a backend or a sleep threw (see the class comment). */
function toLlmError(error: unknown, signal: AbortSignal | undefined): LlmError {
  if (error instanceof CancelledError) return error;
  if (signal?.aborted) return new CancelledError("The request was cancelled", { cause: error });
  if (isLlmError(error)) return error;
  const message = describeError(error);
  return new NetworkError(`LLM request failed: ${message}`, { cause: error });
}
