// Types of state-values.js (plain browser JavaScript, served as it is): the page and the server
// (src/ui/session-tracker.ts) share its rules, so a session reads the same in both.

/**
 * An XState state value as a short path: `"idle"` → `idle`, `{ iterating: "toolTurn" }` →
 * `iterating.toolTurn`, parallel regions joined with `, `.
 */
export declare function formatStateValue(value: unknown): string;

/**
 * One line for "where is this session": the chat machine's state, with the iteration's while the
 * chat is iterating; the session machine's when no chat has run yet.
 */
export declare function summarizeStates(states: Record<string, unknown>): string;

/** The `data-state-id`s of every active state node (ancestors and leaves) of a state value. */
export declare function activeStateIds(
  prefix: string,
  value: unknown,
): Array<{ id: string; isLeaf: boolean }>;

/**
 * Whether a drawn transition (by its `data-source` / `data-target` state ids) is one the move from
 * the state value `previous` to `current` took.
 */
export declare function isTakenTransition(
  prefix: string,
  previous: unknown,
  current: unknown,
): (source: string, target: string) => boolean;
