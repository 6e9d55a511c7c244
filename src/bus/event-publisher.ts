import { createEventBytesWriter } from "../events/event-bytes.js";
import { type EventStamp, type StampedEventListener, TAKES_STAMPED_EVENTS } from "../events/event-emitter.js";
import { fitEventToPayload } from "../events/fit-event.js";
import type { AgentEvent, EventBody, EventKind } from "../events/types.js";
import type { Bus } from "./bus.js";
import { BusError } from "./bus-errors.js";
import { isOverMaxPayload } from "./payload-size.js";
import { DEFAULT_PREFIX, eventSubject } from "./subjects.js";

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
 * Publishes each event as JSON on `<prefix>.events.<agent>.<session>.<Kind>`.
 * On the hot path (one call per text delta), so it does nothing but build the subject and the
 * JSON: UTF-8 bytes written straight from the emitter's stamp and the body (see
 * {@link createEventBytesWriter}), handed as they are to a bus that takes bytes (NATS) and decoded
 * for the others; no validation, no copies. Best-effort: a failing bus
 * or an unserialisable event is counted and swallowed, never thrown into the chat.
 *
 * An event over the bus's max payload (a long result or tool output) is not lost: its long strings
 * are cut, with a visible marker and `truncated: true` (see {@link fitEventToPayload}).
 */
export function createBusEventPublisher(bus: Bus, options: BusEventPublisherOptions = {}): BusEventPublisher {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const { onError } = options;
  // A session publishes on a handful of subjects: the same string each time, so the bus sees a
  // subject it has already checked and the client a flat string.
  const subjects = new Map<EventKind, string>();
  let agent = "";
  let session = "";
  const subjectOf = (eventAgent: string, eventSession: string, kind: EventKind): string => {
    if (eventAgent !== agent || eventSession !== session) {
      subjects.clear();
      agent = eventAgent;
      session = eventSession;
    }
    let subject = subjects.get(kind);
    if (subject === undefined) {
      subject = eventSubject(prefix, agent, session, kind);
      subjects.set(kind, subject);
    }
    return subject;
  };
  let failures = 0;
  const fail = (error: unknown, event: AgentEvent): void => {
    failures++;
    if (onError === undefined) return;
    try {
      onError(error, event);
    } catch {
      // Best-effort all the way down.
    }
  };
  const publish = takesBytes(bus) ? publishBytes(bus, subjectOf, fail) : publishStrings(bus, subjectOf, fail);
  return Object.defineProperty(publish, "failures", { get: () => failures }) as BusEventPublisher;
}

type BytesBus = Bus & Pick<Required<Bus>, "publishBytes">;
type SubjectOf = (agent: string, session: string, kind: EventKind) => string;
type Fail = (error: unknown, event: AgentEvent) => void;

function takesBytes(bus: Bus): bus is BytesBus {
  return typeof bus.publishBytes === "function";
}

const dropped = (): BusError => new BusError("the bus dropped the event");

/**
 * For a bus that takes strings (the in-process one): the same writer's bytes, decoded, so that
 * every bus carries the JSON of one writer.
 */
function publishStrings(bus: Bus, subjectOf: SubjectOf, fail: Fail): (event: AgentEvent) => void {
  const writer = createEventBytesWriter();
  const decoder = new TextDecoder();
  return (event) => {
    try {
      let data = decoder.decode(writer.event(event));
      if (isOverMaxPayload(data, bus.maxPayload)) data = fitEventToPayload(event, bus.maxPayload) ?? data;
      const droppedBefore = bus.droppedPublishes;
      bus.publish(subjectOf(event.agent, event.session, event.kind), data);
      if (bus.droppedPublishes !== droppedBefore) fail(dropped(), event);
    } catch (error) {
      fail(error, event);
    }
  };
}

/**
 * For a bus that takes bytes: the UTF-8 JSON from {@link createEventBytesWriter}, and the stamped
 * form offered to the emitter (see {@link TAKES_STAMPED_EVENTS}), so that when the publisher is
 * the session's only listener no event object is built at all (it is, from the stamp and the body,
 * only for an event too large for the bus and for `onError`).
 */
function publishBytes(bus: BytesBus, subjectOf: SubjectOf, fail: Fail): (event: AgentEvent) => void {
  const writer = createEventBytesWriter();
  const eventOf = (stamp: Readonly<EventStamp>, body: EventBody): AgentEvent =>
    ({ ...stamp, ...body }) as AgentEvent;
  /** An event over the bus's max payload, its long strings cut (or as it is, for the bus to drop and count). */
  const publishFitted = (subject: string, event: AgentEvent, bytes: Uint8Array): void => {
    const fitted = fitEventToPayload(event, bus.maxPayload);
    const droppedBefore = bus.droppedPublishes;
    if (fitted === undefined) bus.publishBytes(subject, bytes);
    else bus.publish(subject, fitted);
    if (bus.droppedPublishes !== droppedBefore) fail(dropped(), event);
  };
  const publishStamped: StampedEventListener = (stamp, body) => {
    try {
      const subject = subjectOf(stamp.agent, stamp.session, body.kind);
      const bytes = writer.stamped(stamp, body);
      // Written so that a limit that is not a number (a partial test double) means no limit.
      if (bytes.length > bus.maxPayload) {
        publishFitted(subject, eventOf(stamp, body), bytes);
        return;
      }
      const droppedBefore = bus.droppedPublishes;
      bus.publishBytes(subject, bytes);
      if (bus.droppedPublishes !== droppedBefore) fail(dropped(), eventOf(stamp, body));
    } catch (error) {
      fail(error, eventOf(stamp, body));
    }
  };
  const publish = (event: AgentEvent): void => {
    try {
      const subject = subjectOf(event.agent, event.session, event.kind);
      const bytes = writer.event(event);
      if (bytes.length > bus.maxPayload) {
        publishFitted(subject, event, bytes);
        return;
      }
      const droppedBefore = bus.droppedPublishes;
      bus.publishBytes(subject, bytes);
      if (bus.droppedPublishes !== droppedBefore) fail(dropped(), event);
    } catch (error) {
      fail(error, event);
    }
  };
  return Object.defineProperty(publish, TAKES_STAMPED_EVENTS, { value: publishStamped });
}
