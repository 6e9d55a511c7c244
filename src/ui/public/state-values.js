// XState state values, for the page and the server alike (src/ui/session-tracker.ts imports this
// file; its types are in state-values.d.ts): one set of rules, so a session reads the same in both.

/**
 * An XState state value as a short path: `"idle"` → `idle`, `{ iterating: "toolTurn" }` →
 * `iterating.toolTurn`, parallel regions joined with `, `.
 */
export function formatStateValue(value) {
  if (typeof value === "string") return value;
  if (!value || typeof value !== "object") return "";
  return Object.entries(value)
    .map(([key, inner]) => {
      const rest = formatStateValue(inner);
      if (rest === "") return key;
      return rest.includes(", ") ? `${key}.(${rest})` : `${key}.${rest}`;
    })
    .join(", ");
}

/**
 * One line for "where is this session": the chat machine's state, with the iteration's while the
 * chat is iterating; the session machine's when no chat has run yet.
 */
export function summarizeStates(states) {
  if (states.chat !== undefined) {
    const chat = formatStateValue(states.chat);
    if (chat.startsWith("iterating") && states.iteration !== undefined) {
      return `chat: ${chat} · iteration: ${formatStateValue(states.iteration)}`;
    }
    return `chat: ${chat}`;
  }
  const machines = Object.keys(states);
  const preferred = states.session !== undefined ? "session" : machines[0];
  return preferred === undefined ? "" : `${preferred}: ${formatStateValue(states[preferred])}`;
}

/** The `data-state-id`s of every active state node (ancestors and leaves) of a state value. */
export function activeStateIds(prefix, value) {
  if (typeof value === "string") return [{ id: `${prefix}.${value}`, isLeaf: true }];
  if (!value || typeof value !== "object") return [];
  const ids = [];
  for (const [key, inner] of Object.entries(value)) {
    const id = `${prefix}.${key}`;
    const below = activeStateIds(id, inner);
    ids.push({ id, isLeaf: below.length === 0 }, ...below);
  }
  return ids;
}

/**
 * Whether a drawn transition (by its `data-source` / `data-target` state ids) is one the move from
 * the state value `previous` to `current` took: it leaves a state that was active (the root always
 * is) and enters one that was not. Guarded alternatives between the same two states all match.
 */
export function isTakenTransition(prefix, previous, current) {
  const before = new Set([prefix, ...activeStateIds(prefix, previous).map(({ id }) => id)]);
  const entered = new Set(
    activeStateIds(prefix, current)
      .map(({ id }) => id)
      .filter((id) => !before.has(id)),
  );
  return (source, target) => before.has(source) && entered.has(target);
}
