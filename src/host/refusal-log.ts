/** How often one rule's refusals are logged at most, by default: once a minute. */
export const DEFAULT_REFUSAL_LOG_INTERVAL_MS = 60_000;

/** Logs one refusal: `rule` names the limit it hit, `line` says what was refused and why. */
export type RefusalLog = (rule: string, line: string) => void;

/**
 * A log of refused requests that names the rule each broke, without letting a caller who keeps
 * trying flood it: per rule, the first refusal of each interval is logged, and the next logged one
 * says how many were refused in between.
 *
 * @example
 * const refused = createRefusalLog((line) => console.error(line));
 * refused("max-sessions", "refused a new session assistant/s2: the host is at its limit");
 * // → "refused a new session assistant/s2 (rule: max-sessions): the host is at its limit"
 */
export function createRefusalLog(
  log: (line: string) => void,
  options: { now?: () => number; intervalMs?: number } = {},
): RefusalLog {
  const now = options.now ?? Date.now;
  const intervalMs = options.intervalMs ?? DEFAULT_REFUSAL_LOG_INTERVAL_MS;
  const byRule = new Map<string, { loggedAt: number; unlogged: number }>();
  return (rule, line) => {
    const at = now();
    const state = byRule.get(rule);
    if (state !== undefined && at - state.loggedAt < intervalMs) {
      state.unlogged++;
      return;
    }
    const more =
      state === undefined || state.unlogged === 0 ? "" : ` (${state.unlogged} more since the last line)`;
    byRule.set(rule, { loggedAt: at, unlogged: 0 });
    const colon = line.indexOf(": ");
    log(
      colon < 0
        ? `${line} (rule: ${rule})${more}`
        : `${line.slice(0, colon)} (rule: ${rule})${line.slice(colon)}${more}`,
    );
  };
}
