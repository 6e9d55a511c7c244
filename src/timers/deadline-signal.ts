/**
 * A signal that aborts with a `TimeoutError` (as `AbortSignal.timeout` does) once `now()` reaches
 * `deadline`, and never before it.
 *
 * `AbortSignal.timeout(deadline - Date.now())` is not that: Node starts a timer from the event loop's
 * time as of the start of the current turn, so a timer set late in a long turn (a loaded machine)
 * fires early by however long that turn had run. A chat asked with its parent's deadline would then
 * be stopped before the deadline, and the parent, still within it, would go on without its answer.
 * Here each firing reads the clock and waits out whatever is left. Like `AbortSignal.timeout`, the
 * timer does not keep the process alive.
 *
 * @example
 * ```ts
 * const signal = deadlineSignal(Date.now() + 30_000); // aborts 30 s from now, not a moment sooner
 * ```
 */
export function deadlineSignal(deadline: number, now: () => number = Date.now): AbortSignal {
  const controller = new AbortController();
  const check = (): void => {
    const left = deadline - now();
    if (left <= 0) {
      controller.abort(new DOMException("The chat's deadline passed.", "TimeoutError"));
      return;
    }
    setTimeout(check, left).unref();
  };
  check();
  return controller.signal;
}
