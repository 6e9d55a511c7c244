import { UsageError } from "./cli-context.js";

/** Resolves when a long-running command is told to stop (SIGINT / SIGTERM). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}

/** `--port N`: 0 (the default) picks a free port. */
export function parsePort(value: string | boolean | undefined): number {
  if (value === undefined) return 0;
  const port = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new UsageError(`--port must be a number from 0 to 65535, got "${String(value)}"`);
  }
  return port;
}
