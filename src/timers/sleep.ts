/**
 * Waits `ms` milliseconds (a negative wait is none). With a `signal`, rejects with the signal's
 * reason as soon as it aborts, and at once when it already has, so a stopped caller never waits.
 *
 * @example
 * ```ts
 * await sleep(250);                  // back off before trying again
 * await sleep(1_000, controller.signal); // rejects when controller.abort() is called
 * ```
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(
      () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      },
      Math.max(0, ms),
    );
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
