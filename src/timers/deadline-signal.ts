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
  return deadlineTimer(deadline, now).signal;
}

/** A {@link deadlineSignal} that can be called off: `clear()` drops its timer (the work ended first). */
export interface DeadlineTimer {
  readonly signal: AbortSignal;
  clear(): void;
}

/**
 * {@link deadlineSignal} for work that usually ends well before its deadline: a chat given
 * `--max-chat-time 10m` that answers in a second would otherwise leave its timer and signal alive
 * for the other nine minutes and more — at hundreds of chats a second, hundreds of thousands of
 * them. `clear()` once the work is over; the signal then never aborts.
 */
export function deadlineTimer(deadline: number, now: () => number = Date.now): DeadlineTimer {
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let isCleared = false;
  const check = (): void => {
    timer = undefined;
    if (isCleared) return;
    const left = deadline - now();
    if (left <= 0) {
      controller.abort(new DOMException("The chat's deadline passed.", "TimeoutError"));
      return;
    }
    timer = setTimeout(check, left).unref();
  };
  check();
  return {
    signal: controller.signal,
    clear() {
      isCleared = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
  };
}
