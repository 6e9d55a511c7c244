import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Bus, BusMessage } from "../../src/bus/bus.js";
import { createBusEventPublisher } from "../../src/bus/event-publisher.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { createEventEmitter, TAKES_STAMPED_EVENTS } from "../../src/events/event-emitter.js";
import type { AgentEvent } from "../../src/events/types.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { record, uniqueRoot } from "./bus-helpers.js";

function delta(session: string, seq: number): AgentEvent {
  return {
    kind: "ModelTextDelta",
    agent: "bot",
    session,
    chatId: `chat-${session}`,
    seq,
    ts: "2025-01-01T00:00:00.000Z",
    iteration: 1,
    delta: `${session}:${seq}`,
  };
}

/** A bus whose publish always throws (a broken transport). */
function throwingBus(): Bus {
  const local = new LocalBus();
  return Object.assign(Object.create(local) as LocalBus, {
    publish: () => {
      throw new Error("transport down");
    },
  });
}

describe("createBusEventPublisher", () => {
  it("publishes each event as its JSON.stringify on <prefix>.events.<agent>.<session>.<Kind>", async () => {
    const bus = new LocalBus();
    const received: BusMessage[] = [];
    bus.subscribe("agentloop.events.>", (message) => received.push(message));
    const publish = createBusEventPublisher(bus);
    const event: AgentEvent = {
      kind: "ChatCompleted",
      agent: "bot",
      session: "s42",
      chatId: "c1",
      seq: 9,
      ts: "2025-01-01T00:00:00.000Z",
      iteration: 0,
      result: 'done: "ok" ✓ 🎉\n',
      usage: { prompt: 1, completion: 2, total: 3, cached: 0 },
      tokenUsed: 3,
    };
    publish(event);
    await bus.flush();
    expect(received.map((message) => message.subject)).toEqual(["agentloop.events.bot.s42.ChatCompleted"]);
    expect(received[0]?.data).toBe(JSON.stringify(event));
    expect(publish.failures).toBe(0);
    await bus.close();
  });

  it("uses the configured prefix", async () => {
    const bus = new LocalBus();
    const received: string[] = [];
    bus.subscribe("acme.events.*.*.*", (message) => received.push(message.subject));
    createBusEventPublisher(bus, { prefix: "acme" })(delta("s1", 1));
    await bus.flush();
    expect(received).toEqual(["acme.events.bot.s1.ModelTextDelta"]);
    await bus.close();
  });

  it("publishes each event on its own agent, session and kind when they alternate", async () => {
    const bus = new LocalBus();
    const received: string[] = [];
    bus.subscribe("agentloop.events.>", (message) => received.push(message.subject));
    const publish = createBusEventPublisher(bus);
    publish(delta("s1", 1));
    publish({ ...delta("s2", 2), agent: "other" });
    publish(delta("s2", 3));
    publish({ ...delta("s1", 4), kind: "ModelReasoningDelta", delta: "thinking" } as AgentEvent);
    publish(delta("s1", 5));
    await bus.flush();
    expect(received).toEqual([
      "agentloop.events.bot.s1.ModelTextDelta",
      "agentloop.events.other.s2.ModelTextDelta",
      "agentloop.events.bot.s2.ModelTextDelta",
      "agentloop.events.bot.s1.ModelReasoningDelta",
      "agentloop.events.bot.s1.ModelTextDelta",
    ]);
    await bus.close();
  });

  it("swallows and counts a throwing bus, telling onError", () => {
    const errors: string[] = [];
    const publish = createBusEventPublisher(throwingBus(), {
      onError: (error, event) => errors.push(`${(error as Error).message} @ ${event.seq}`),
    });
    expect(() => publish(delta("s1", 1))).not.toThrow();
    expect(() => publish(delta("s1", 2))).not.toThrow();
    expect(publish.failures).toBe(2);
    expect(errors).toEqual(["transport down @ 1", "transport down @ 2"]);
  });

  it("counts the events the bus dropped, in the same count, telling onError", async () => {
    const bus = new LocalBus();
    await bus.close();
    const errors: string[] = [];
    const publish = createBusEventPublisher(bus, {
      onError: (error, event) =>
        errors.push(`${(error as Error).name}: ${(error as Error).message} @ ${event.seq}`),
    });
    publish(delta("s1", 1));
    expect(publish.failures).toBe(1);
    expect(bus.droppedPublishes).toBe(1);
    expect(errors).toEqual(["BusError: the bus dropped the event @ 1"]);
  });

  it("survives an onError that throws too", () => {
    const publish = createBusEventPublisher(throwingBus(), {
      onError: () => {
        throw new Error("logger down");
      },
    });
    expect(() => publish(delta("s1", 1))).not.toThrow();
    expect(publish.failures).toBe(1);
  });

  it("counts an event that cannot be serialised instead of throwing", async () => {
    const bus = new LocalBus();
    const publish = createBusEventPublisher(bus);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const event: AgentEvent = { ...delta("s1", 1), kind: "StateChanged", machine: "chat", state: circular };
    expect(() => publish(event)).not.toThrow();
    expect(publish.failures).toBe(1);
    await bus.close();
  });
});

/**
 * A LocalBus that also takes bytes, as NatsBus does: it keeps what came as bytes (subject and
 * text) and delivers it as text.
 */
class BytesLocalBus extends LocalBus {
  readonly asBytes: { subject: string; data: string }[] = [];
  publishBytes(subject: string, data: Uint8Array): void {
    const text = Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString("utf8");
    this.asBytes.push({ subject, data: text });
    this.publish(subject, text);
  }
}

describe("createBusEventPublisher on a bus that takes bytes", () => {
  it("publishes the bytes of JSON.stringify of each event, as its emitter's only listener without the event object", async () => {
    const bus = new BytesLocalBus();
    const publish = createBusEventPublisher(bus);
    expect((publish as { [TAKES_STAMPED_EVENTS]?: unknown })[TAKES_STAMPED_EVENTS]).toBeTypeOf("function");
    const seen: AgentEvent[] = [];
    const now = () => new Date("2025-01-01T00:00:00.000Z");
    const common = { agent: "bot", session: "s1", host: "h1", now };
    const publishing = createEventEmitter({ ...common, listeners: [publish] });
    const watching = createEventEmitter({ ...common, listeners: [(event) => seen.push(event)] });
    for (const emitter of [publishing, watching]) {
      emitter.chatId = "c1";
      emitter.emit(0, { kind: "ChatStarted", text: 'say "hi" ✓' });
      emitter.emit(1, { kind: "ModelTextDelta", delta: "a" });
      emitter.emit(0, { kind: "StateChanged", machine: "chat", state: "idle" }, "");
    }
    // Published as an object too (another listener next to it, or a caller of its own).
    publish(delta("s2", 7));
    seen.push(delta("s2", 7));
    expect(bus.asBytes).toEqual(
      seen.map((event) => ({
        subject: `agentloop.events.${event.agent}.${event.session}.${event.kind}`,
        data: JSON.stringify(event),
      })),
    );
    expect(publish.failures).toBe(0);
    await bus.close();
  });

  it("counts the events the bus dropped or threw on, telling onError the whole event", async () => {
    const bus = new BytesLocalBus();
    await bus.close();
    const errors: string[] = [];
    const publish = createBusEventPublisher(bus, {
      onError: (error, event) => errors.push(`${(error as Error).message} @ ${JSON.stringify(event)}`),
    });
    const emitter = createEventEmitter({
      agent: "bot",
      session: "s1",
      now: () => new Date(0),
      listeners: [publish],
    });
    emitter.emit(1, { kind: "ModelTextDelta", delta: "lost" });
    publish(delta("s1", 2));
    const failing = Object.assign(new BytesLocalBus(), {
      publishBytes: () => {
        throw new Error("transport down");
      },
    });
    const publishFailing = createBusEventPublisher(failing, {
      onError: (error, event) => errors.push(`${(error as Error).message} @ ${JSON.stringify(event)}`),
    });
    createEventEmitter({
      agent: "bot",
      session: "s1",
      now: () => new Date(0),
      listeners: [publishFailing],
    }).emit(1, { kind: "ModelTextDelta", delta: "lost too" });
    expect(publish.failures).toBe(2);
    expect(publishFailing.failures).toBe(1);
    expect(bus.droppedPublishes).toBe(2);
    const stamp =
      '"agent":"bot","session":"s1","chatId":"","seq":1,"ts":"1970-01-01T00:00:00.000Z","iteration":1';
    expect(errors).toEqual([
      `the bus dropped the event @ {${stamp},"kind":"ModelTextDelta","delta":"lost"}`,
      `the bus dropped the event @ ${JSON.stringify(delta("s1", 2))}`,
      `transport down @ {${stamp},"kind":"ModelTextDelta","delta":"lost too"}`,
    ]);
  });

  it("counts an event that cannot be serialised instead of throwing, and publishes the next", async () => {
    const bus = new BytesLocalBus();
    const publish = createBusEventPublisher(bus);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const emitter = createEventEmitter({ agent: "bot", session: "s1", listeners: [publish] });
    expect(() => emitter.emit(1, { kind: "StateChanged", machine: "chat", state: circular })).not.toThrow();
    emitter.emit(1, { kind: "ModelTextDelta", delta: "next" });
    expect(publish.failures).toBe(1);
    expect(bus.asBytes.map(({ data }) => JSON.parse(data) as AgentEvent)).toMatchObject([
      { seq: 2, delta: "next" },
    ]);
    await bus.close();
  });

  it("publishes an event over the max payload truncated, from the stamped form too", async () => {
    const bus = new BytesLocalBus({ maxPayload: 4_000 });
    const received: BusMessage[] = [];
    bus.subscribe("agentloop.events.>", (message) => received.push(message));
    const publish = createBusEventPublisher(bus);
    const emitter = createEventEmitter({ agent: "bot", session: "s1", listeners: [publish] });
    emitter.emit(0, {
      kind: "ChatCompleted",
      result: "x".repeat(10_000),
      usage: { prompt: 1, completion: 2, total: 3, cached: 0 },
      tokenUsed: 3,
    });
    emitter.emit(1, { kind: "ModelTextDelta", delta: "small" });
    await bus.flush();
    const [big, small] = received.map((message) => JSON.parse(message.data) as Record<string, unknown>);
    expect(big).toMatchObject({
      kind: "ChatCompleted",
      agent: "bot",
      session: "s1",
      seq: 1,
      truncated: true,
    });
    expect(received[0]?.data.length).toBeLessThanOrEqual(4_000);
    expect(small).toMatchObject({ kind: "ModelTextDelta", seq: 2, delta: "small" });
    expect(small).not.toHaveProperty("truncated");
    expect(publish.failures).toBe(0);
    await bus.close();
  });
});

describe("events over the bus's max payload", () => {
  let server: NatsServer;
  beforeAll(async () => {
    server = await workerNatsServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  function completed(session: string, result: string): AgentEvent {
    return {
      kind: "ChatCompleted",
      agent: "bot",
      session,
      chatId: "c-big",
      seq: 3,
      ts: "2025-01-01T00:00:00.000Z",
      iteration: 0,
      result,
      usage: { prompt: 1, completion: 2, total: 3, cached: 0 },
      tokenUsed: 3,
    };
  }

  it("publishes a ChatCompleted too big for NATS truncated, with a marker, instead of losing it", async () => {
    const publisherBus = await NatsBus.connect({ url: server.url });
    const subscriberBus = await NatsBus.connect({ url: server.url });
    const prefix = uniqueRoot();
    const inbox = record(subscriberBus, `${prefix}.events.>`);
    await subscriberBus.flush();
    const publish = createBusEventPublisher(publisherBus, { prefix });
    const result = "word ".repeat(300_000);
    expect(Buffer.byteLength(result)).toBeGreaterThan(publisherBus.maxPayload);
    publish(completed("s1", result));
    const [message] = await inbox.waitFor(1, 60_000);
    expect(message?.subject).toBe(`${prefix}.events.bot.s1.ChatCompleted`);
    expect(Buffer.byteLength(message?.data ?? "")).toBeLessThanOrEqual(publisherBus.maxPayload);
    const event = JSON.parse(message?.data ?? "") as AgentEvent & { truncated?: boolean; result: string };
    expect(event).toMatchObject({ kind: "ChatCompleted", chatId: "c-big", seq: 3, truncated: true });
    expect(event.result.startsWith("word word ")).toBe(true);
    expect(event.result).toMatch(
      /…\[truncated: \d+ more characters did not fit the bus's \d+-byte message limit\]$/,
    );
    expect(publisherBus.droppedPublishes).toBe(0);
    expect(publish.failures).toBe(0);
    await Promise.all([publisherBus.close(), subscriberBus.close()]);
  });

  it("leaves events that fit untouched (no truncated field)", async () => {
    const bus = new LocalBus({ maxPayload: 4_000 });
    const received: BusMessage[] = [];
    bus.subscribe("agentloop.events.>", (message) => received.push(message));
    const publish = createBusEventPublisher(bus);
    publish(completed("s1", "short"));
    publish(completed("s2", "x".repeat(10_000)));
    await bus.flush();
    const [small, big] = received.map((message) => JSON.parse(message.data) as Record<string, unknown>);
    expect(small).toEqual(completed("s1", "short"));
    expect(big).toMatchObject({ session: "s2", truncated: true });
    expect(received[1]?.data.length).toBeLessThanOrEqual(4_000);
    await bus.close();
  });
});

describe("event delivery with many concurrent streams", () => {
  let server: NatsServer;
  beforeAll(async () => {
    server = await workerNatsServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  // The in-process bus is one shared instance; over NATS the subscriber is another connection.
  const buses: [string, () => Promise<[Bus, Bus]>][] = [
    [
      "LocalBus",
      async () => {
        const bus = new LocalBus();
        return [bus, bus];
      },
    ],
    [
      "NatsBus",
      () => Promise.all([NatsBus.connect({ url: server.url }), NatsBus.connect({ url: server.url })]),
    ],
  ];

  it.each(
    buses,
  )("loses no delta and keeps each session's order over %s (8 streams × 500)", async (_, open) => {
    const [publisherBus, subscriberBus] = await open();
    const prefix = uniqueRoot();
    const sessions = Array.from({ length: 8 }, (_, index) => `s${index}`);
    const received = new Map<string, number[]>(sessions.map((session) => [session, []]));
    let count = 0;
    const total = sessions.length * 500;
    const done = new Promise<void>((resolve) => {
      subscriberBus.subscribe(`${prefix}.events.bot.*.ModelTextDelta`, (message) => {
        const event = JSON.parse(message.data) as AgentEvent;
        received.get(event.session)?.push(event.seq);
        if (++count === total) resolve();
      });
    });
    await subscriberBus.flush();
    const publish = createBusEventPublisher(publisherBus, { prefix });
    // Interleave the streams the way concurrent chats do.
    for (let seq = 1; seq <= 500; seq++) {
      for (const session of sessions) publish(delta(session, seq));
      if (seq % 100 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      done,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`got ${count} of ${total}`)), 10_000);
      }),
    ]).finally(() => clearTimeout(timer));
    const expected = Array.from({ length: 500 }, (_, index) => index + 1);
    for (const session of sessions) expect(received.get(session), session).toEqual(expected);
    expect(publish.failures).toBe(0);
    await Promise.all([publisherBus.close(), subscriberBus.close()]);
  });
});
