import type { ToolCall } from "./types.js";

/**
 * The calls of one model turn with every id unique: a call whose id an earlier call of the turn
 * already has gets `<id>_<n>` (the smallest n from 2 up that no call of the turn has). Some
 * OpenAI-compatible servers number calls per turn (`call_1`, `call_1`) or send none; two calls
 * under one id would share one approval, one journal entry and one result, and both providers
 * refuse a history where two results answer one id. The new id keeps to letters, digits, `_` and
 * `-` when the old one did (Anthropic's pattern for tool-use ids), and it is the one the history,
 * the events and the approvals use from then on. Returns `calls` itself when no id repeats.
 */
export function uniqueToolCallIds(calls: readonly ToolCall[]): ToolCall[] {
  // One call (most turns that call tools) cannot repeat an id: no set to build.
  if (calls.length < 2) return calls as ToolCall[];
  const taken = new Set(calls.map((call) => call.id));
  if (taken.size === calls.length) return calls as ToolCall[];
  const seen = new Set<string>();
  return calls.map((call) => {
    if (!seen.has(call.id)) {
      seen.add(call.id);
      return call;
    }
    let suffix = 2;
    while (taken.has(`${call.id}_${suffix}`)) suffix += 1;
    const id = `${call.id}_${suffix}`;
    taken.add(id);
    seen.add(id);
    return { ...call, id };
  });
}
