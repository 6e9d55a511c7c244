import type { z } from "zod";
import { EVENT_BODY_SCHEMAS, EventEnvelope } from "./event-schemas.js";
import type { AgentEvent, EventKind, UnknownEvent } from "./types.js";

/**
 * What {@link parseEvent} made of a value:
 * - `known`: a valid event of a kind this version knows;
 * - `unknown-kind`: the common fields are valid but the kind is new to this version (a newer host).
 *   Forward compatibility: a reader that keeps everything (tail's JSONL, its log lines) keeps it as
 *   it is; a reader that needs the kind's fields (the UI timeline, the remote chat's printer) skips
 *   it. It is never an error: events may gain kinds the way they gain fields;
 * - `invalid`: not an event (not an object, a common field missing or of the wrong type, or a known
 *   kind with a malformed field), with the reason in one line.
 */
export type ParsedEvent =
  | { status: "known"; event: AgentEvent }
  | { status: "unknown-kind"; event: UnknownEvent }
  | { status: "invalid"; reason: string };

/**
 * Checks a value (an event as parsed from JSON) and says what it is: an event of a kind this
 * version knows, one of a newer kind, or not an event, with the reason. The one event parser:
 * every reader of events (the UI server, `tail`, the remote `chat`, the JetStream event log)
 * checks what it got here. The value is validated against its kind's schema
 * and returned as it came, so fields added by a later version pass through: events may gain fields,
 * and a reader of this version must not refuse a newer host's.
 *
 * @param value Anything; a bus payload or a JSONL line goes through {@link parseEventJson}.
 * @returns `known` with the event typed by its `kind`, `unknown-kind`, or `invalid` with a reason.
 *
 * @example
 * ```ts
 * import { allEventsPattern, DEFAULT_PREFIX, NatsBus } from "agentloop/bus";
 * import { parseEvent } from "agentloop/events";
 *
 * const bus = await NatsBus.connect({ url: "nats://127.0.0.1:4222" });
 * bus.subscribe(allEventsPattern(DEFAULT_PREFIX), (message) => {
 *   const parsed = parseEvent(JSON.parse(message.data));
 *   if (parsed.status !== "known") return; // a newer host's kind, or not an event
 *   const { event } = parsed;
 *   if (event.kind === "ChatCompleted") console.log(`${event.agent}/${event.session}: ${event.result}`);
 *   if (event.kind === "ToolCallFailed") console.error(`${event.toolName}: ${event.error.message}`);
 * });
 * ```
 */
export function parseEvent(value: unknown): ParsedEvent {
  const envelope = EventEnvelope.safeParse(value);
  if (!envelope.success) return { status: "invalid", reason: describeIssues(envelope.error) };
  const kind = envelope.data.kind;
  if (!Object.hasOwn(EVENT_BODY_SCHEMAS, kind)) {
    return { status: "unknown-kind", event: value as UnknownEvent };
  }
  const body = EVENT_BODY_SCHEMAS[kind as EventKind].safeParse(value);
  if (!body.success) return { status: "invalid", reason: `${kind}: ${describeIssues(body.error)}` };
  return { status: "known", event: value as AgentEvent };
}

/**
 * {@link parseEvent} of a bus payload or a JSONL line: text that is not JSON is `invalid` too.
 *
 * @example
 * ```ts
 * import { readFileSync } from "node:fs";
 * import { parseEventJson } from "agentloop/events";
 *
 * // e.g. the output of `agentloop chat --events jsonl … > events.jsonl`
 * for (const line of readFileSync("events.jsonl", "utf8").split("\n").filter(Boolean)) {
 *   const parsed = parseEventJson(line);
 *   if (parsed.status === "known" && parsed.event.kind === "ToolCallCompleted") {
 *     console.log(parsed.event.toolName, parsed.event.durationMs);
 *   } else if (parsed.status === "invalid") {
 *     console.error(`skipped: ${parsed.reason}`);
 *   }
 * }
 * ```
 */
export function parseEventJson(text: string): ParsedEvent {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { status: "invalid", reason: "not JSON" };
  }
  return parseEvent(value);
}

/** `seq: expected number, received string; ts: …` — each issue with its path, one line. */
function describeIssues(error: z.ZodError): string {
  return error.issues
    .map((issue) => (issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`))
    .join("; ");
}

/**
 * A bus payload's event when it is one of a known kind, else undefined.
 * @deprecated Use {@link parseEventJson}, which says why a payload is not an event and keeps
 * events of kinds newer than this version.
 */
export function parseAgentEvent(data: string): AgentEvent | undefined {
  const parsed = parseEventJson(data);
  return parsed.status === "known" ? parsed.event : undefined;
}
