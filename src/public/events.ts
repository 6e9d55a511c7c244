/**
 * `agentloop/events`: what an agent publishes at every step, and the one way to read it.
 *
 * Every event is a plain object with a `kind` ({@link AgentEvent}, narrowed with
 * {@link EventOf}); each kind has a zod schema ({@link EVENT_BODY_SCHEMAS}). Check what arrives
 * with {@link parseEvent} / {@link parseEventJson}: events of kinds newer than this version are
 * kept apart (`unknown-kind`), never mistaken for malformed ones. This entry loads no bus, model
 * or agent code: a service that only reads events needs nothing else.
 *
 * @example
 * ```ts
 * import { createInterface } from "node:readline";
 * import { parseEventJson } from "agentloop/events";
 *
 * // Events as JSON Lines on stdin (e.g. `agentloop tail … --jsonl /dev/stdout`): print the answer's text.
 * for await (const line of createInterface({ input: process.stdin })) {
 *   const parsed = parseEventJson(line);
 *   if (parsed.status === "known" && parsed.event.kind === "ModelTextDelta") process.stdout.write(parsed.event.delta);
 *   else if (parsed.status === "invalid") console.error(`skipped: ${parsed.reason}`);
 * }
 * ```
 *
 * @packageDocumentation
 */

export { allEventsPattern, eventSubject, sessionEventsPattern } from "../bus/subjects.js";
export { type ErrorInfo, toErrorInfo } from "../errors/error-info.js";
export { EVENT_BODY_SCHEMAS, EventEnvelope } from "../events/event-schemas.js";
export { type ParsedEvent, parseEvent, parseEventJson } from "../events/parse-event.js";
export {
  type AgentEvent,
  type CompactionPhase,
  EVENT_KINDS,
  type EventBase,
  type EventBody,
  type EventKind,
  type EventListener,
  type EventOf,
  type UnknownEvent,
} from "../events/types.js";
