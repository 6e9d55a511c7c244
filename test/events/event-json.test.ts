import { describe, expect, it } from "vitest";
import { createEventEmitter } from "../../src/events/event-emitter.js";
import { createEventJsonWriter } from "../../src/events/event-json.js";
import type { AgentEvent } from "../../src/events/types.js";
import { createSecretRedactor } from "../../src/text/secret-redactor.js";

function stamped(fields: Record<string, unknown>): AgentEvent {
  return {
    agent: "bot",
    session: "s1",
    chatId: "c1",
    seq: 1,
    ts: "2025-01-01T00:00:00.000Z",
    iteration: 1,
    ...fields,
  } as AgentEvent;
}

describe("createEventJsonWriter", () => {
  it("writes exactly what JSON.stringify writes for the emitter's events, across chats, stamps and kinds", () => {
    const events: AgentEvent[] = [];
    const emitter = createEventEmitter({
      agent: "bot",
      session: "s1",
      listeners: [(event) => events.push(event)],
    });
    emitter.chatId = "chat-1";
    emitter.emit(0, { kind: "ChatStarted", text: 'say "hi"\n\u2028 ✓ 🎉' });
    emitter.emit(1, { kind: "ModelTextDelta", delta: "a\\b\u0001" });
    emitter.emit(1, {
      kind: "ToolCallStarted",
      toolCallId: "t1",
      toolName: "echo",
      arguments: '{"a":[1,null]}',
    });
    emitter.emit(0, {
      kind: "ChatCompleted",
      result: "done",
      usage: { prompt: 1, completion: 2, total: 3, cached: 0 },
      tokenUsed: 3,
    });
    emitter.chatId = "chat-2";
    emitter.emit(2, {
      kind: "ChatFailed",
      error: { code: "internal", message: "boom", retryable: false, name: "Error" },
      cancelled: false,
    });
    emitter.emit(0, { kind: "StateChanged", machine: "chat", state: "idle" }, "");
    const write = createEventJsonWriter();
    for (const event of events) expect(write(event)).toBe(JSON.stringify(event));
  });

  it("writes the host id of a hosted emitter as JSON.stringify does, and leaves out an unset one", () => {
    const events: AgentEvent[] = [];
    for (const host of ["host-a", undefined, "host-b"]) {
      const emitter = createEventEmitter({
        agent: "bot",
        session: "s1",
        ...(host === undefined ? {} : { host }),
        listeners: [(event) => events.push(event)],
      });
      emitter.chatId = "chat-1";
      emitter.emit(1, { kind: "ModelTextDelta", delta: "x" });
      emitter.emit(1, { kind: "ModelTextDelta", delta: "y" });
    }
    const write = createEventJsonWriter();
    for (const event of events) expect(write(event)).toBe(JSON.stringify(event));
    expect(JSON.parse(write(events[0]!))).toMatchObject({ host: "host-a" });
    expect(JSON.parse(write(events[2]!))).not.toHaveProperty("host");
  });

  it("writes redacted events as JSON.stringify does", () => {
    const events: AgentEvent[] = [];
    const redactor = createSecretRedactor(["sk-secret-value"]);
    const emitter = createEventEmitter({
      agent: "bot",
      session: "s1",
      listeners: [(event) => events.push(event)],
      redactor,
    });
    emitter.emit(1, { kind: "ModelTextDelta", delta: "key sk-secret-value here" });
    const write = createEventJsonWriter();
    expect(write(events[0]!)).toBe(JSON.stringify(events[0]));
    expect(write(events[0]!)).not.toContain("sk-secret-value");
  });

  it("leaves out fields JSON has no form for, as JSON.stringify does", () => {
    const event = stamped({ kind: "ChatCompleted", result: "done", usage: undefined, extra: () => 1 });
    expect(createEventJsonWriter()(event)).toBe(JSON.stringify(event));
  });

  it("re-encodes the stamp when the identity or the timestamp changes", () => {
    const write = createEventJsonWriter();
    const first = stamped({ kind: "ModelTextDelta", delta: "x" });
    const others = [
      { ...first, agent: "other" },
      { ...first, session: "s2" },
      { ...first, chatId: "" },
      { ...first, ts: "2025-01-01T00:00:00.001Z", seq: 2, iteration: 3 },
    ];
    expect(write(first)).toBe(JSON.stringify(first));
    for (const event of others) expect(write(event)).toBe(JSON.stringify(event));
  });

  it("hands events that do not open with the emitter's stamp to JSON.stringify unchanged", () => {
    const write = createEventJsonWriter();
    const reordered = Object.assign({ kind: "ModelTextDelta", delta: "x" }, stamped({})) as AgentEvent;
    const partial = { agent: "bot", session: "s1", kind: "ModelTextDelta" } as unknown as AgentEvent;
    const oddTypes = stamped({ kind: "ModelTextDelta", delta: "x", seq: Number.NaN });
    const withToJson = stamped({ kind: "ModelTextDelta", delta: "x", toJSON: () => ({ replaced: true }) });
    const fromClass = Object.assign(
      Object.create({ inherited: 1 }) as object,
      stamped({ kind: "ChatStarted" }),
    );
    for (const event of [reordered, partial, oddTypes, withToJson, fromClass as AgentEvent]) {
      expect(write(event)).toBe(JSON.stringify(event));
    }
  });
});
