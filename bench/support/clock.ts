/** Monotonic time in milliseconds with sub-microsecond resolution. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Monotonic time in microseconds; comparable between processes on one machine (CLOCK_MONOTONIC). */
export function nowUs(): number {
  return Number(process.hrtime.bigint()) / 1e3;
}

/** Yields to the event loop once (timers and I/O get their turn). */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
