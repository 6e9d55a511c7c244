import type { Bus } from "../../src/bus/bus.js";

/**
 * How the baselines publish: the envelope fields of the events a minimal loop must emit for a UI
 * (ChatStarted, ModelRequest, ModelTextDelta, ToolCallStarted/Completed, ChatCompleted), stamped
 * and stringified inline, straight onto the bus. No StateChanged, no segments, no listeners list.
 */
export interface BaselineEvents {
  emit(kind: string, iteration: number, fields: Record<string, unknown>): void;
}

/** A per-chat publisher for the baselines; `undefined` bus → events off. */
export function createBaselineEvents(
  bus: Bus | undefined,
  agent: string,
  session: string,
  chatId: string,
): BaselineEvents | undefined {
  if (bus === undefined) return undefined;
  const subjectPrefix = `agentloop.events.${agent}.${session}.`;
  let seq = 0;
  return {
    emit(kind, iteration, fields) {
      seq += 1;
      const event = { kind, agent, session, chatId, seq, ts: new Date().toISOString(), iteration, ...fields };
      bus.publish(subjectPrefix + kind, JSON.stringify(event));
    },
  };
}
