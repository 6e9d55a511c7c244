import type { z } from "zod";
import type {
  CompactionPhase as CompactionPhaseSchema,
  EVENT_BODY_SCHEMAS,
  EventBase as EventBaseSchema,
  EventEnvelope as EventEnvelopeSchema,
} from "./event-schemas.js";

/**
 * The agent's lifecycle events: one discriminated union on `kind`, inferred from the wire schemas
 * in ./event-schemas.ts (the one place an event's fields are written down). These are a public
 * contract (they go on NATS as `agentloop.events.<agent>.<session>.<kind>` and into JSONL): fields
 * may be added, never renamed.
 */

export { EVENT_KINDS } from "./event-schemas.js";

type BodySchemas = typeof EVENT_BODY_SCHEMAS;

/** The `kind` of an event. */
export type EventKind = keyof BodySchemas;

/** An error as it travels in events: `{ code, message, retryable, status?, name? }` (src/errors). */
export type { ErrorInfo } from "../errors/error-info.js";
export { toErrorInfo } from "../errors/error-info.js";

/** Fields every event carries. */
export type EventBase = z.infer<typeof EventBaseSchema>;

/** Where a `ContextCompaction` event is in the compaction. */
export type CompactionPhase = z.infer<typeof CompactionPhaseSchema>;

/** The kind-specific part of each event. */
export type EventBody = { [K in EventKind]: z.infer<BodySchemas[K]> }[EventKind];

/** One event: the common fields plus the kind's own. */
export type AgentEvent = EventBase & EventBody;

/** The event of one kind, e.g. `EventOf<"ToolCallCompleted">`. */
export type EventOf<K extends EventKind> = Extract<AgentEvent, { kind: K }>;

/**
 * An event whose common fields are valid but whose kind this version does not know (a newer
 * host's): readers that keep everything (the logger, the JSONL file) keep it as it came.
 */
export type UnknownEvent = z.infer<typeof EventEnvelopeSchema> & Record<string, unknown>;

/** Receives events. Best-effort: implementations must not throw into the loop. */
export type EventListener = (event: AgentEvent) => void;
