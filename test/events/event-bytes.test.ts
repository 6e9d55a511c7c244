import { describe, expect, it } from "vitest";
import { createEventBytesWriter } from "../../src/events/event-bytes.js";
import {
  createEventEmitter,
  type EventEmitter,
  type EventStamp,
  TAKES_STAMPED_EVENTS,
} from "../../src/events/event-emitter.js";
import type { AgentEvent, EventBody } from "../../src/events/types.js";
import { createSecretRedactor, type SecretRedactor } from "../../src/text/secret-redactor.js";

const text = (bytes: Uint8Array): string => Buffer.from(bytes).toString("utf8");
/** What the bytes must be: the UTF-8 of JSON.stringify. */
const expected = (event: unknown): Buffer => Buffer.from(JSON.stringify(event), "utf8");

/**
 * Two twin emitters, one with an ordinary listener (the events the listeners see), one whose only
 * listener takes the stamped form and writes it (what the bus publisher does): the same emits
 * give `events[i]` and `written[i]`.
 */
function twins(params: { host?: string; redactor?: SecretRedactor } = {}): {
  emit(iteration: number, body: EventBody, chatId?: string): void;
  setChat(chatId: string): void;
  events: AgentEvent[];
  written: Uint8Array[];
} {
  const writer = createEventBytesWriter();
  const events: AgentEvent[] = [];
  const written: Uint8Array[] = [];
  const clock = Date.parse("2025-01-01T00:00:00.000Z");
  // Both emitters read the same instant per emit; it moves every other emit.
  let reads = 0;
  const now = () => new Date(clock + Math.floor(reads++ / 4));
  const stampedListener = Object.assign(() => {}, {
    [TAKES_STAMPED_EVENTS]: (stamp: Readonly<EventStamp>, body: EventBody) => {
      written.push(writer.stamped(stamp, body));
    },
  });
  const common = { agent: "bot", session: "s1", now, ...params };
  const plain = createEventEmitter({ ...common, listeners: [(event) => events.push(event)] });
  const stamped = createEventEmitter({ ...common, listeners: [stampedListener] });
  const both: EventEmitter[] = [plain, stamped];
  return {
    emit: (iteration, body, chatId) => {
      for (const emitter of both) emitter.emit(iteration, body, chatId);
    },
    setChat: (chatId) => {
      for (const emitter of both) emitter.chatId = chatId;
    },
    events,
    written,
  };
}

function stamped(fields: Record<string, unknown>): AgentEvent {
  return {
    agent: "bot",
    session: "s1",
    host: undefined,
    chatId: "c1",
    seq: 1,
    ts: "2025-01-01T00:00:00.000Z",
    iteration: 1,
    ...fields,
  } as AgentEvent;
}

describe("createEventBytesWriter", () => {
  it("writes exactly the bytes of JSON.stringify for the emitter's events, as objects and stamped, across chats, stamps and kinds", () => {
    for (const host of [undefined, "host-a"]) {
      const { emit, setChat, events, written } = twins(host === undefined ? {} : { host });
      setChat("chat-1");
      emit(0, { kind: "ChatStarted", text: 'say "hi"\n\u2028 ✓ 🎉 \ud800 \u007f' });
      emit(1, { kind: "ModelTextDelta", delta: "a\\b\u0001" });
      emit(1, { kind: "ModelTextDelta", delta: "plain words" });
      emit(1, { kind: "ModelTextDelta", delta: "C:\\temp" });
      emit(1, { kind: "ModelTextDelta", delta: 'a "quote"' });
      emit(1, { kind: "ModelTextDelta", delta: "tab\there" });
      emit(1, { kind: "ToolCallStarted", toolCallId: "t1", toolName: "echo", arguments: '{"a":[1,null]}' });
      emit(0, {
        kind: "ChatCompleted",
        result: `long ${"é".repeat(300)} and ${"x".repeat(300)}`,
        usage: { prompt: 1, completion: 2, total: 3, cached: 0 },
        tokenUsed: 3,
      });
      setChat("chat-2");
      emit(2, {
        kind: "ChatFailed",
        error: { code: "internal", message: "boom", retryable: false, name: "Error" },
        cancelled: false,
      });
      emit(0, { kind: "StateChanged", machine: "chat", state: "idle" }, "");
      const writer = createEventBytesWriter();
      expect(written).toHaveLength(events.length);
      events.forEach((event, index) => {
        expect(Buffer.from(writer.event(event))).toEqual(expected(event));
        expect(Buffer.from(written[index]!)).toEqual(expected(event));
      });
      if (host === undefined) expect(JSON.parse(text(written[0]!))).not.toHaveProperty("host");
      else expect(JSON.parse(text(written[0]!))).toMatchObject({ host });
    }
  });

  it("writes redacted events as JSON.stringify does", () => {
    const { emit, events, written } = twins({ redactor: createSecretRedactor(["sk-secret-value"]) });
    emit(1, { kind: "ModelTextDelta", delta: "key sk-secret-value here" });
    expect(Buffer.from(written[0]!)).toEqual(expected(events[0]));
    expect(text(written[0]!)).not.toContain("sk-secret-value");
    expect(Buffer.from(createEventBytesWriter().event(events[0]!))).toEqual(expected(events[0]));
  });

  it("writes every kind of value as JSON.stringify does, leaving out those with no JSON form", () => {
    const body = {
      kind: "ChatCompleted",
      result: "done",
      usage: undefined,
      extra: () => 1,
      symbol: Symbol("s"),
      nothing: null,
      yes: true,
      no: false,
      nan: Number.NaN,
      infinite: Number.NEGATIVE_INFINITY,
      negativeZero: -0,
      fraction: 0.1 + 0.2,
      huge: 1e21,
      zero: 0,
      negative: -5,
      largestSmall: 2 ** 31 - 1,
      notSmall: 2 ** 31,
      unsafe: 2 ** 53 + 2,
      list: [1, "two", { three: undefined }, undefined],
      nested: { at: new Date(0), deeper: { toJSON: (key: string) => `key ${key}` } },
      empty: "",
      "": "empty name",
      'quoted "name"': "é",
    } as unknown as EventBody;
    const { emit, events, written } = twins();
    emit(1, body);
    expect(Buffer.from(written[0]!)).toEqual(expected(events[0]));
    expect(Buffer.from(createEventBytesWriter().event(events[0]!))).toEqual(expected(events[0]));
  });

  it("writes bodies the stamp-then-fields order would get wrong as JSON.stringify of the event does", () => {
    const bodies = [
      // An array index: the event carries it before the stamp.
      { kind: "ModelTextDelta", 7: "index", delta: "x" },
      // A stamp field: the event carries the body's value in the stamp's place.
      { kind: "ModelTextDelta", chatId: "from the body", delta: "x" },
      // JSON.stringify calls an own toJSON, and passes a value's toJSON its member name.
      { kind: "ModelTextDelta", toJSON: () => ({ replaced: true }) },
      { kind: "ModelTextDelta", when: { toJSON: (key: string) => `member ${key}` } },
      Object.assign(Object.create({ inherited: 1 }) as object, { kind: "ChatStarted", text: "hi" }),
    ] as unknown as EventBody[];
    const { emit, events, written } = twins();
    for (const body of bodies) emit(1, body);
    events.forEach((event, index) => {
      expect(Buffer.from(written[index]!)).toEqual(expected(event));
    });
  });

  it("hands events that do not open with the emitter's stamp to JSON.stringify unchanged", () => {
    const write = createEventBytesWriter();
    const reordered = Object.assign({ kind: "ModelTextDelta", delta: "x" }, stamped({})) as AgentEvent;
    const partial = { agent: "bot", session: "s1", kind: "ModelTextDelta" } as unknown as AgentEvent;
    const hostless = {
      agent: "bot",
      session: "s1",
      chatId: "c1",
      seq: 1,
      ts: "t",
      iteration: 1,
    } as AgentEvent;
    const oddTypes = [
      stamped({ kind: "ModelTextDelta", delta: "x", seq: Number.NaN }),
      stamped({ kind: "ModelTextDelta", delta: "x", iteration: "1" }),
      stamped({ kind: "ModelTextDelta", delta: "x", chatId: 42 }),
      stamped({ kind: "ModelTextDelta", delta: "x", ts: null }),
    ];
    const withToJson = stamped({ kind: "ModelTextDelta", delta: "x", toJSON: () => ({ replaced: true }) });
    const fromClass = Object.assign(
      Object.create({ inherited: 1 }) as object,
      stamped({ kind: "ChatStarted" }),
    ) as AgentEvent;
    for (const event of [reordered, partial, hostless, ...oddTypes, withToJson, fromClass]) {
      expect(Buffer.from(write.event(event))).toEqual(expected(event));
    }
  });

  it("writes each event's own stamp as the identity and the timestamp change", () => {
    const write = createEventBytesWriter();
    const first = stamped({ kind: "ModelTextDelta", delta: "x" });
    const others = [
      { ...first, agent: "other" },
      { ...first, session: "s2" },
      { ...first, host: "h1" },
      { ...first, chatId: "" },
      { ...first, agent: "é", session: 'quote"d', host: "back\\slash", chatId: "tab\there" },
      { ...first, ts: "2025-01-01T00:00:00.001Z", seq: 2, iteration: 3 },
      { ...first, seq: 2 ** 40, iteration: 10 },
      { ...first, seq: 1.5, iteration: -1 },
      first,
    ];
    expect(Buffer.from(write.event(first))).toEqual(expected(first));
    for (const event of others) expect(Buffer.from(write.event(event))).toEqual(expected(event));
  });

  it("never writes into bytes it handed out: views of many events, a large one among them, stay as written", () => {
    const write = createEventBytesWriter();
    const events: AgentEvent[] = [];
    for (let seq = 1; seq <= 3_000; seq++) {
      const delta = seq === 1_500 ? "y".repeat(300_000) : `delta ${seq} ${"z".repeat(seq % 50)}`;
      events.push(stamped({ kind: "ModelTextDelta", seq, delta }));
    }
    const views = events.map((event) => write.event(event));
    const changed = views.flatMap((view, index) =>
      Buffer.from(view).equals(expected(events[index])) ? [] : [events[index]!.seq],
    );
    expect(changed).toEqual([]);
  });

  it("throws as JSON.stringify does for an event with no JSON form, and writes the next one whole", () => {
    const write = createEventBytesWriter();
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const stamp: EventStamp = {
      agent: "bot",
      session: "s1",
      host: undefined,
      chatId: "c1",
      seq: 1,
      ts: "2025-01-01T00:00:00.000Z",
      iteration: 1,
    };
    for (const state of [circular, 1n]) {
      const body = { kind: "StateChanged", machine: "chat", state } as unknown as EventBody;
      const event = { ...stamp, ...body } as AgentEvent;
      expect(() => JSON.stringify(event)).toThrow(TypeError);
      expect(() => write.event(event)).toThrow(TypeError);
      expect(() => write.stamped(stamp, body)).toThrow(TypeError);
      const next = stamped({ kind: "ModelTextDelta", delta: "after" });
      expect(Buffer.from(write.event(next))).toEqual(expected(next));
      const nextBody = { kind: "ModelTextDelta", delta: "after" } as EventBody;
      expect(Buffer.from(write.stamped(stamp, nextBody))).toEqual(expected({ ...stamp, ...nextBody }));
    }
  });
});
