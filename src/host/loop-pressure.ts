/** How often the event loop's lateness is sampled by default. */
export const DEFAULT_LOOP_SAMPLE_MS = 100;

/** Weight of the newest sample in the smoothed lateness: a lone pause fades within a few samples. */
const SMOOTHING = 0.5;

/** Timers the gauge uses, injected so tests control time. */
export interface PressureTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: PressureTimers = {
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    // The gauge alone never keeps a process alive.
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface LoopPressureOptions {
  /** Smoothed lateness (ms) above which {@link LoopPressure.isOverloaded} holds. */
  maxDelayMs: number;
  /** How often a timer measures how late it fires (default {@link DEFAULT_LOOP_SAMPLE_MS}). */
  sampleMs?: number;
  /** Monotonic clock in ms (default `performance.now`). */
  now?: () => number;
  timers?: PressureTimers;
}

/**
 * How far behind the host's event loop runs: a timer due every `sampleMs` measures how late it
 * fires (smoothed for the figure it reports; two late samples in a row to count). A host offered
 * more work than it can do falls behind (each turn of its loop has more callbacks to run than the
 * last); a lateness above `maxDelayMs`
 * means every request it takes now waits that long before anything of it runs, and so do its
 * lease renewals. While so, the host refuses new chats at once (a retryable `overloaded`), so
 * the work it already took can finish, instead of stalling for seconds on all of it.
 *
 * @example
 * const pressure = new LoopPressure({ maxDelayMs: 1_000 });
 * pressure.start();
 * if (pressure.isOverloaded) refuse(`the host runs ${pressure.delayMs} ms behind`);
 */
export class LoopPressure {
  readonly maxDelayMs: number;
  readonly #sampleMs: number;
  readonly #now: () => number;
  readonly #timers: PressureTimers;
  #smoothedMs = 0;
  /** The last two samples: only lateness in both counts as being behind now. */
  #previousMs = 0;
  #latestMs = 0;
  #handle: unknown;
  #isRunning = false;

  constructor(options: LoopPressureOptions) {
    if (!(options.maxDelayMs > 0))
      throw new RangeError(`maxDelayMs must be positive, got ${options.maxDelayMs}`);
    this.maxDelayMs = options.maxDelayMs;
    this.#sampleMs = Math.max(1, options.sampleMs ?? DEFAULT_LOOP_SAMPLE_MS);
    this.#now = options.now ?? (() => performance.now());
    this.#timers = options.timers ?? realTimers;
  }

  /** The smoothed lateness of the loop, ms (whole). */
  get delayMs(): number {
    return Math.round(this.#smoothedMs);
  }

  /**
   * The loop runs further behind than `maxDelayMs`: new work should be refused for now. It takes
   * two samples in a row over the limit: one late sample only says the loop paused once (a long
   * tool call on the main thread, a full collection), and by the time a request is read after it
   * the loop has caught up.
   */
  get isOverloaded(): boolean {
    return Math.min(this.#previousMs, this.#latestMs) > this.maxDelayMs;
  }

  /** Starts sampling (idempotent). */
  start(): void {
    if (this.#isRunning) return;
    this.#isRunning = true;
    this.#schedule();
  }

  /** Stops sampling; the gauge then reads as it last did. */
  close(): void {
    this.#isRunning = false;
    if (this.#handle !== undefined) this.#timers.clearTimeout(this.#handle);
    this.#handle = undefined;
  }

  /** Takes one measured lateness (ms) into the smoothed figure. */
  record(lateMs: number): void {
    const late = Math.max(0, lateMs);
    this.#smoothedMs += SMOOTHING * (late - this.#smoothedMs);
    this.#previousMs = this.#latestMs;
    this.#latestMs = late;
  }

  #schedule(): void {
    const due = this.#now() + this.#sampleMs;
    this.#handle = this.#timers.setTimeout(() => {
      if (!this.#isRunning) return;
      this.record(this.#now() - due);
      this.#schedule();
    }, this.#sampleMs);
  }
}
