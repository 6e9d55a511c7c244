/**
 * An XState state value as a short path: `"idle"` → `idle`, `{ iterating: "toolTurn" }` →
 * `iterating.toolTurn`, parallel regions joined with `, `.
 */
export function formatStateValue(value: unknown): string {
  if (typeof value === "string") return value;
  if (typeof value !== "object" || value === null) return "";
  const parts = Object.entries(value as Record<string, unknown>).map(([key, inner]) => {
    const rest = formatStateValue(inner);
    if (rest === "") return key;
    return rest.includes(", ") ? `${key}.(${rest})` : `${key}.${rest}`;
  });
  return parts.join(", ");
}

/**
 * One line for "where is this session": the chat machine's state, with the iteration's while the
 * chat is iterating; the session machine's when no chat has run yet.
 */
export function summarizeStates(states: Record<string, unknown>): string {
  if (states.chat !== undefined) {
    const chat = formatStateValue(states.chat);
    if (chat.startsWith("iterating") && states.iteration !== undefined) {
      return `chat: ${chat} · iteration: ${formatStateValue(states.iteration)}`;
    }
    return `chat: ${chat}`;
  }
  const [machine, value] = Object.entries(states)[0] ?? [];
  const preferred = states.session !== undefined ? "session" : machine;
  if (preferred === undefined) return "";
  return `${preferred}: ${formatStateValue(states[preferred] ?? value)}`;
}
