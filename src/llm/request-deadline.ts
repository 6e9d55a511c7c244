import { CancelledError, type LlmError, RequestTimeoutError } from "./errors.js";

/** Default time to first byte, streaming only (a non-streaming reasoning model sends nothing until done). */
export const DEFAULT_FIRST_BYTE_TIMEOUT_MS = 60_000;
/** Default total time of a non-streaming request. */
export const DEFAULT_TOTAL_TIMEOUT_MS = 5 * 60_000;
/** Default total time of a streaming request. */
export const DEFAULT_STREAM_TOTAL_TIMEOUT_MS = 30 * 60_000;
/** Default longest silence of a stream once it has started (streaming only). */
export const DEFAULT_STREAM_IDLE_TIMEOUT_MS = 120_000;

export interface RequestDeadlineOptions {
  /** Time until {@link RequestDeadline.markProgress} is first called; unset means no such limit. */
  firstByteMs?: number;
  /**
   * Longest time between two {@link RequestDeadline.markProgress} calls once the first came (a
   * stream that stalls mid-answer); unset means no such limit.
   */
  idleMs?: number;
  totalMs: number;
}

/**
 * One request's internal AbortController, linked to the caller's signal and to the two timers.
 * The SDK gets {@link signal}; whoever stops the request first (a timer or the caller) is
 * remembered, so the failure it causes can be reported as a timeout or a cancellation rather
 * than as whatever the SDK happens to throw on abort (or not throw: an aborted SDK stream just
 * ends).
 */
export class RequestDeadline {
  readonly #controller = new AbortController();
  readonly #callerSignal: AbortSignal | undefined;
  readonly #onCallerAbort = () =>
    this.#stop(new CancelledError("the request was cancelled", { cause: this.#callerSignal?.reason }));
  #firstByteTimer: ReturnType<typeof setTimeout> | undefined;
  readonly #idleMs: number | undefined;
  #idleTimer: ReturnType<typeof setTimeout> | undefined;
  readonly #totalTimer: ReturnType<typeof setTimeout>;
  #stopError: LlmError | undefined;
  #isDisposed = false;

  constructor(callerSignal: AbortSignal | undefined, options: RequestDeadlineOptions) {
    this.#callerSignal = callerSignal;
    this.#idleMs = options.idleMs;
    if (options.firstByteMs !== undefined) {
      const ms = options.firstByteMs;
      this.#firstByteTimer = setTimeout(
        () =>
          this.#stop(
            new RequestTimeoutError(`no response from the model within ${ms} ms (time to first byte)`),
          ),
        ms,
      );
    }
    this.#totalTimer = setTimeout(
      () => this.#stop(new RequestTimeoutError(`the generation did not finish within ${options.totalMs} ms`)),
      options.totalMs,
    );
    if (callerSignal?.aborted) this.#onCallerAbort();
    else callerSignal?.addEventListener("abort", this.#onCallerAbort, { once: true });
  }

  /** The signal to hand to the SDK. */
  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** Why the request was stopped (timeout or cancellation), or undefined while it may go on. */
  get stopError(): LlmError | undefined {
    return this.#stopError;
  }

  /**
   * A chunk arrived: the time-to-first-byte limit no longer applies, and the idle limit starts
   * over. Called once per chunk, so the idle timer is re-armed in place, not re-created.
   */
  markProgress(): void {
    if (this.#isDisposed) return;
    if (this.#firstByteTimer !== undefined) {
      clearTimeout(this.#firstByteTimer);
      this.#firstByteTimer = undefined;
    }
    if (this.#idleMs === undefined) return;
    if (this.#idleTimer === undefined) {
      const ms = this.#idleMs;
      this.#idleTimer = setTimeout(
        () =>
          this.#stop(
            new RequestTimeoutError(`the model sent nothing for ${ms} ms mid-stream (stream idle timeout)`),
          ),
        ms,
      );
    } else this.#idleTimer.refresh();
  }

  /** Clears the timers and unlinks the caller's signal; call once the request settled. */
  dispose(): void {
    this.#isDisposed = true;
    clearTimeout(this.#firstByteTimer);
    clearTimeout(this.#idleTimer);
    clearTimeout(this.#totalTimer);
    this.#callerSignal?.removeEventListener("abort", this.#onCallerAbort);
  }

  #stop(error: LlmError): void {
    if (this.#stopError) return;
    this.#stopError = error;
    this.dispose();
    this.#controller.abort(error);
  }
}
