import { sleep } from "../timers/sleep.js";
import { CancelledError } from "./errors.js";

/** Waits `ms` milliseconds; rejects with a {@link CancelledError} as soon as `signal` aborts. */
export async function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  try {
    await sleep(ms, signal);
  } catch {
    throw cancelledBy(signal);
  }
}

/** The error a cancelled LLM operation rejects with; keeps the abort reason as its cause. */
export function cancelledBy(signal: AbortSignal | undefined): CancelledError {
  return new CancelledError("The request was cancelled", { cause: signal?.reason });
}

/** Throws the {@link CancelledError} of an aborted signal; does nothing otherwise. */
export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw cancelledBy(signal);
}
