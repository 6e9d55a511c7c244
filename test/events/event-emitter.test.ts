import { describe, expect, it } from "vitest";
import { createEventEmitter, type EventStamp, TAKES_STAMPED_EVENTS } from "../../src/events/event-emitter.js";
import type { AgentEvent, EventBody } from "../../src/events/types.js";
import { createSecretRedactor } from "../../src/text/secret-redactor.js";

const FIXED_NOW = () => new Date("2025-01-01T00:00:00.000Z");

/** A listener offering the stamped form: records what it got, as the event it stands for. */
function stampedListener(): {
  listener: ((event: AgentEvent) => void) & {
    [TAKES_STAMPED_EVENTS]: (stamp: Readonly<EventStamp>, body: EventBody) => void;
  };
  asObjects: AgentEvent[];
  stamped: AgentEvent[];
} {
  const asObjects: AgentEvent[] = [];
  const stamped: AgentEvent[] = [];
  const listener = Object.assign((event: AgentEvent) => asObjects.push(event), {
    [TAKES_STAMPED_EVENTS]: (stamp: Readonly<EventStamp>, body: EventBody) => {
      stamped.push({ ...stamp, ...body } as AgentEvent);
    },
  });
  return { listener, asObjects, stamped };
}

describe("createEventEmitter's stamped form", () => {
  it("hands its only listener, when it offers it, the stamp and the redacted body: the same event, never built", () => {
    const redactor = createSecretRedactor(["sk-secret-value"]);
    const { listener, asObjects, stamped } = stampedListener();
    const seen: AgentEvent[] = [];
    const common = { agent: "bot", session: "s1", host: "h1", now: FIXED_NOW, redactor, lastSeq: 41 };
    const offering = createEventEmitter({ ...common, listeners: [listener] });
    const ordinary = createEventEmitter({ ...common, listeners: [(event) => seen.push(event)] });
    for (const emitter of [offering, ordinary]) {
      emitter.chatId = "c1";
      emitter.emit(1, { kind: "ModelTextDelta", delta: "key sk-secret-value" });
      emitter.emit(0, { kind: "StateChanged", machine: "chat", state: "idle" }, "");
      emitter.chatId = "c2";
      emitter.emit(2, { kind: "ModelTextDelta", delta: "b" });
    }
    expect(asObjects).toEqual([]);
    expect(stamped).toEqual(seen);
    // Same fields in the same order: the same JSON.
    expect(stamped.map((event) => JSON.stringify(event))).toEqual(seen.map((event) => JSON.stringify(event)));
    expect(stamped.map((event) => event.seq)).toEqual([42, 43, 44]);
    expect(JSON.stringify(stamped)).not.toContain("sk-secret-value");
    expect(offering.seq).toBe(44);
  });

  it("builds the event for every listener when there are several, one of them offering the stamped form", () => {
    const { listener, asObjects, stamped } = stampedListener();
    const others: AgentEvent[] = [];
    const listeners = [listener, (event: AgentEvent) => others.push(event)];
    const emitter = createEventEmitter({ agent: "bot", session: "s1", now: FIXED_NOW, listeners });
    emitter.emit(1, { kind: "ModelTextDelta", delta: "a" });
    // A listener added later (a chat's own) and removed again: the stamped form comes back.
    listeners.pop();
    emitter.emit(1, { kind: "ModelTextDelta", delta: "b" });
    expect(asObjects.map((event) => event.seq)).toEqual([1]);
    expect(others).toEqual(asObjects);
    expect(stamped.map((event) => event.seq)).toEqual([2]);
  });

  it("swallows a throwing stamped listener and goes on numbering", () => {
    const listener = Object.assign(() => {}, {
      [TAKES_STAMPED_EVENTS]: () => {
        throw new Error("listener down");
      },
    });
    const emitter = createEventEmitter({ agent: "bot", session: "s1", listeners: [listener] });
    expect(() => emitter.emit(1, { kind: "ModelTextDelta", delta: "a" })).not.toThrow();
    expect(() => emitter.emit(1, { kind: "ModelTextDelta", delta: "b" })).not.toThrow();
    expect(emitter.seq).toBe(2);
  });
});
