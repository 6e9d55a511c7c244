/**
 * What went wrong, as one line of text for a log, a reply or a tool result: an `Error`'s message,
 * anything else (a thrown string, a number) as `String()` makes it.
 *
 * @example
 * ```ts
 * import { describeError } from "agentloop/errors";
 *
 * try {
 *   JSON.parse("{");
 * } catch (error) {
 *   console.error(`bad input: ${describeError(error)}`);
 * }
 * ```
 */
export function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
