import type { Bus } from "../bus/bus.js";
import { BusError } from "../bus/bus-errors.js";
import { isOverMaxPayload } from "../bus/payload-size.js";
import { DEFAULT_PREFIX, eventSubject } from "../bus/subjects.js";
import { createEventJsonWriter } from "./event-json.js";
import { fitEventToPayload } from "./fit-event.js";
import type { AgentEvent, EventKind } from "./types.js";

export interface BusEventPublisherOptions {
  /** Subject prefix (default `agentloop`). */
  prefix?: string;
  /** Told about each failed publish (already counted). Its own exceptions are swallowed too. */
  onError?: (error: unknown, event: AgentEvent) => void;
}

/**
 * Publishes one event; never throws. `failures` is THE count of the host's lost events: events that
 * could not be serialised, a bus that threw, and events the bus dropped (which it reports only by
 * its own `droppedPublishes`, a count of every message kind). The host logs the first of them and
 * shows the count in its `$SRV.STATS` (see `SessionAgentFactoryHandle.eventPublishFailures`).
 */
export interface BusEventPublisher {
  (event: AgentEvent): void;
  readonly failures: number;
}

/**
 * Publishes each event as JSON on `<prefix>.events.<agent>.<session>.<Kind>` (SPEC §9, §11).
 * On the hot path (one call per text delta), so it does nothing but build the subject and the
 * JSON (with the chat's stamp encoded once, see {@link createEventJsonWriter}): no validation, no
 * copies. Best-effort: a failing bus or an unserialisable event is
 * counted and swallowed, never thrown into the chat.
 *
 * An event over the bus's max payload (a long result or tool output) is not lost: its long strings
 * are cut, with a visible marker and `truncated: true` (see {@link fitEventToPayload}).
 */
export function createBusEventPublisher(bus: Bus, options: BusEventPublisherOptions = {}): BusEventPublisher {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const { onError } = options;
  const toJson = createEventJsonWriter();
  // A session publishes on a handful of subjects: the same string each time, so the bus sees a
  // subject it has already checked and the client a flat string.
  const subjects = new Map<EventKind, string>();
  let agent = "";
  let session = "";
  const subjectOf = (event: AgentEvent): string => {
    if (event.agent !== agent || event.session !== session) {
      subjects.clear();
      agent = event.agent;
      session = event.session;
    }
    let subject = subjects.get(event.kind);
    if (subject === undefined) {
      subject = eventSubject(prefix, agent, session, event.kind);
      subjects.set(event.kind, subject);
    }
    return subject;
  };
  let failures = 0;
  const publish = (event: AgentEvent): void => {
    try {
      let data = toJson(event);
      if (isOverMaxPayload(data, bus.maxPayload)) data = fitEventToPayload(event, bus.maxPayload) ?? data;
      const droppedBefore = bus.droppedPublishes;
      bus.publish(subjectOf(event), data);
      if (bus.droppedPublishes !== droppedBefore) fail(new BusError("the bus dropped the event"), event);
    } catch (error) {
      fail(error, event);
    }
  };
  const fail = (error: unknown, event: AgentEvent): void => {
    failures++;
    if (onError === undefined) return;
    try {
      onError(error, event);
    } catch {
      // Best-effort all the way down.
    }
  };
  return Object.defineProperty(publish, "failures", { get: () => failures }) as BusEventPublisher;
}
