/**
 * What went wrong, as one line of text for a log, a reply or a tool result: an `Error`'s message,
 * anything else (a thrown string, a number) as `String()` makes it.
 *
 * @example
 * ```ts
 * try { await work(); } catch (error) { log(`work failed: ${describeError(error)}`); }
 * ```
 */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
