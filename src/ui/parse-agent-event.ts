import { z } from "zod";
import { type AgentEvent, EVENT_KINDS } from "../events/types.js";

/**
 * What the UI accepts as an event off the bus: the common fields checked, the kind-specific ones
 * passed through as they are (the page renders what it knows and ignores the rest; events may
 * gain fields, SPEC §9).
 */
export const AgentEventEnvelope = z.looseObject({
  kind: z.enum(EVENT_KINDS),
  agent: z.string(),
  session: z.string(),
  chatId: z.string(),
  seq: z.number(),
  ts: z.string(),
  iteration: z.number(),
});
export type AgentEventEnvelope = z.infer<typeof AgentEventEnvelope>;

/** Parses one bus payload; undefined for anything that is not an event. */
export function parseAgentEvent(data: string): AgentEvent | undefined {
  let json: unknown;
  try {
    json = JSON.parse(data);
  } catch {
    return undefined;
  }
  const parsed = AgentEventEnvelope.safeParse(json);
  return parsed.success ? (parsed.data as unknown as AgentEvent) : undefined;
}
