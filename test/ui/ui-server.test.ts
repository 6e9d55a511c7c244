import { request as httpRequest } from "node:http";
import { jetstreamManager } from "@nats-io/jetstream";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BusMessage } from "../../src/bus/bus.js";
import { ensureEventStream, eventStreamName } from "../../src/bus/event-log.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, controlSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { MACHINE_NAMES } from "../../src/viz/machines.js";
import { workerNatsServer } from "../support/nats-server.js";
import { loopLikeMachine } from "../viz/test-machines.js";
import { checkWellFormed } from "../viz/xml-check.js";
import { createEventFactory, publishEvents, SseReader } from "./ui-helpers.js";

const PREFIX = "agentloop";
const usage = { prompt: 10, completion: 5, total: 15, cached: 0 };

let bus: LocalBus;
let server: UiServer;

beforeEach(async () => {
  bus = new LocalBus();
  server = await startUiServer({
    bus,
    getMachine: (name) => (name === "loop" ? loopLikeMachine : undefined),
    machineNames: ["loop"],
    keepAliveMs: 50,
  });
});

afterEach(async () => {
  await server.close();
  await bus.close();
});

function api(path: string, init?: RequestInit): Promise<Response> {
  return fetch(new URL(path, server.url), init);
}

function postJson(path: string, body: unknown): Promise<Response> {
  return api(path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

async function openEvents(query = ""): Promise<SseReader> {
  const response = await api(`/api/events${query}`);
  expect(response.headers.get("content-type")).toMatch(/^text\/event-stream/);
  return new SseReader(response);
}

describe("GET /api/events", () => {
  it("streams every event published on the bus, one SSE message each, in order", async () => {
    const events = await openEvents();
    const make = createEventFactory("bot", "s1");
    const published = [
      make({ kind: "ChatStarted", text: "hello" }),
      make({ kind: "ModelTextDelta", delta: "Hi" }, 1),
      make({ kind: "StateChanged", machine: "chat", state: { iterating: "toolTurn" } }),
    ];
    // Not events: ignored, never forwarded.
    bus.publish(`${PREFIX}.events.bot.s1.ChatStarted`, "not json");
    bus.publish(`${PREFIX}.events.bot.s1.ChatStarted`, JSON.stringify({ kind: "Nope" }));
    publishEvents(bus, PREFIX, published);
    const received = [await events.next(), await events.next(), await events.next()];
    expect(received).toEqual(published);
    await events.cancel();
  });

  it("filters by agent and session when asked", async () => {
    const events = await openEvents("?agent=bot&session=s2");
    const other = createEventFactory("bot", "s1");
    const mine = createEventFactory("bot", "s2");
    const wanted = mine({ kind: "ChatStarted", text: "mine" });
    publishEvents(bus, PREFIX, [other({ kind: "ChatStarted", text: "other" }), wanted]);
    expect(await events.next()).toEqual(wanted);
    await events.cancel();
  });

  it("sends keep-alive comments", async () => {
    const events = await openEvents();
    await events.nextComment("keep-alive");
    expect(events.comments).toContain("keep-alive");
    await events.cancel();
  });
});

describe("GET /api/sessions", () => {
  it("lists sessions with status, current state and last activity as events arrive", async () => {
    expect(await (await api("/api/sessions")).json()).toEqual({ sessions: [] });
    const make = createEventFactory("bot", "s1");
    const started = make({ kind: "ChatStarted", text: "hello" });
    const state = make({ kind: "StateChanged", machine: "chat", state: { iterating: "toolTurn" } });
    publishEvents(bus, PREFIX, [started, state]);
    await bus.flush();
    const first = (await (await api("/api/sessions")).json()) as { sessions: Array<Record<string, unknown>> };
    expect(first.sessions).toHaveLength(1);
    expect(first.sessions[0]).toMatchObject({
      agent: "bot",
      session: "s1",
      status: "running",
      state: "chat: iterating.toolTurn",
      states: { chat: { iterating: "toolTurn" } },
      lastActivity: state.ts,
      lastSeq: 2,
      chats: 1,
    });

    const later = createEventFactory("helper", "s9");
    const completed = make({ kind: "ChatCompleted", result: "done", usage, tokenUsed: 15 });
    publishEvents(bus, PREFIX, [later({ kind: "ChatStarted", text: "x" }), completed]);
    await bus.flush();
    const second = (await (await api("/api/sessions")).json()) as {
      sessions: Array<Record<string, unknown>>;
    };
    // Most recently active first.
    expect(second.sessions.map((s) => `${s.agent}/${s.session}`)).toEqual(["bot/s1", "helper/s9"]);
    expect(second.sessions[0]).toMatchObject({ status: "completed", usage, lastActivity: completed.ts });
  });
});

describe("GET /api/sessions/<agent>/<session>/events", () => {
  it("replays the session's buffered events, consecutive deltas merged into one", async () => {
    const make = createEventFactory("bot", "s1");
    const events: AgentEvent[] = [
      make({ kind: "ChatStarted", text: "hello" }),
      make({ kind: "ModelStreamSegmentStart", attempt: 1 }, 1),
      make({ kind: "ModelTextDelta", delta: "Hel" }, 1),
      make({ kind: "ModelTextDelta", delta: "lo " }, 1),
      make({ kind: "ModelTextDelta", delta: "there" }, 1),
      make({ kind: "ChatCompleted", result: "Hello there", usage, tokenUsed: 15 }),
    ];
    publishEvents(bus, PREFIX, [
      ...events,
      createEventFactory("bot", "other")({ kind: "ChatStarted", text: "x" }),
    ]);
    await bus.flush();
    const body = (await (await api("/api/sessions/bot/s1/events")).json()) as {
      source: string;
      events: AgentEvent[];
    };
    expect(body.source).toBe("memory");
    expect(body.events.map((event) => event.kind)).toEqual([
      "ChatStarted",
      "ModelStreamSegmentStart",
      "ModelTextDelta",
      "ChatCompleted",
    ]);
    expect(body.events[2]).toMatchObject({ delta: "Hello there", seq: 5 });
  });

  it("answers an unknown session with no events and a bad name with 400", async () => {
    const empty = (await (await api("/api/sessions/bot/nobody/events")).json()) as { events: unknown[] };
    expect(empty.events).toEqual([]);
    const bad = await api("/api/sessions/bot/a%20b/events");
    expect(bad.status).toBe(400);
  });

  it("answers a malformed percent-escape in the session path with 400 bad_request, not 500 internal", async () => {
    const response = await api("/api/sessions/bot/%E0%A4%A/events");
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ ok: false, error: { code: "bad_request" } });
  });
});

describe("POST /api/chat", () => {
  it("forwards { session, text } to the agent's chat subject and returns its reply", async () => {
    const requests: unknown[] = [];
    bus.subscribe(chatSubject(PREFIX, "bot"), (message: BusMessage) => {
      requests.push(JSON.parse(message.data));
      bus.respond(message, JSON.stringify({ ok: true, session: "s1", result: "Hi!", usage }));
    });
    const response = await postJson("/api/chat", { agent: "bot", session: "s1", text: "hello" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true, session: "s1", result: "Hi!", usage });
    expect(requests).toEqual([{ session: "s1", text: "hello" }]);
  });

  it("returns the agent's error reply as it is", async () => {
    bus.subscribe(chatSubject(PREFIX, "bot"), (message: BusMessage) => {
      bus.respond(message, JSON.stringify({ ok: false, error: { code: "queue_overflow", message: "full" } }));
    });
    const response = await postJson("/api/chat", { agent: "bot", session: "s1", text: "hello" });
    expect(await response.json()).toEqual({ ok: false, error: { code: "queue_overflow", message: "full" } });
  });

  it("answers 503 when no agent listens", async () => {
    const response = await postJson("/api/chat", { agent: "ghost", session: "s1", text: "hello" });
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ ok: false, error: { code: "unavailable" } });
  });

  it("rejects bad input with 400 and a reason, without touching the bus", async () => {
    let forwarded = 0;
    bus.subscribe(chatSubject(PREFIX, "bot"), () => {
      forwarded++;
    });
    const notJson = await postJson("/api/chat", "{not json");
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toEqual({
      ok: false,
      error: { code: "bad_request", message: "the body is not valid JSON" },
    });

    const missing = await postJson("/api/chat", { agent: "bot", text: "hello" });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toBe(
      'missing field "session"',
    );

    const badName = await postJson("/api/chat", { agent: "bot.x", session: "s1", text: "hello" });
    expect(badName.status).toBe(400);
    expect(((await badName.json()) as { error: { message: string } }).error.message).toMatch(/field "agent"/);

    const empty = await postJson("/api/chat", { agent: "bot", session: "s1", text: "" });
    expect(empty.status).toBe(400);

    const wrongType = await api("/api/chat", {
      method: "POST",
      body: "agent=bot",
      headers: { "content-type": "text/plain" },
    });
    expect(wrongType.status).toBe(415);

    const wrongMethod = await api("/api/chat");
    expect(wrongMethod.status).toBe(405);
    await bus.flush();
    expect(forwarded).toBe(0);
  });
});

describe("POST /api/control", () => {
  it("forwards the command (with a topic) to the agent's control subject", async () => {
    const requests: unknown[] = [];
    bus.subscribe(controlSubject(PREFIX, "bot"), (message: BusMessage) => {
      requests.push(JSON.parse(message.data));
      bus.respond(message, JSON.stringify({ ok: true }));
    });
    const response = await postJson("/api/control", {
      agent: "bot",
      session: "s1",
      command: "compact",
      topic: "tests",
    });
    expect(await response.json()).toEqual({ ok: true });
    expect(requests).toEqual([{ session: "s1", command: "compact", topic: "tests" }]);
  });

  it("rejects an unknown command", async () => {
    const response = await postJson("/api/control", { agent: "bot", session: "s1", command: "explode" });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { message: string } }).error.message).toMatch(
      /field "command"/,
    );
  });
});

describe("statecharts and the page", () => {
  it("serves a machine as SVG and as the JSON graph model; 404 for an unknown one", async () => {
    const svg = await api("/api/machines/loop.svg");
    expect(svg.headers.get("content-type")).toMatch(/^image\/svg\+xml/);
    const text = await svg.text();
    expect(text).toContain('data-state-id="loop.iterating.finalTurn"');
    const json = (await (await api("/api/machines/loop.json")).json()) as { name: string };
    expect(json.name).toBe("loop");
    expect((await api("/api/machines/nope.svg")).status).toBe(404);
    const info = (await (await api("/api/info")).json()) as Record<string, unknown>;
    expect(info).toMatchObject({ bus: "local", prefix: "agentloop", machines: ["loop"], history: "memory" });
  });

  it("draws the project's own machines by default", async () => {
    const ui = await startUiServer({ bus });
    try {
      for (const name of MACHINE_NAMES) {
        const response = await fetch(new URL(`/api/machines/${name}.svg`, ui.url));
        expect(response.status).toBe(200);
        const svg = await response.text();
        expect(svg).toContain(`data-state-id="${name}"`);
        expect(checkWellFormed(svg)).toEqual([]);
      }
      const info = (await (await fetch(new URL("/api/info", ui.url))).json()) as { machines: string[] };
      expect(info.machines).toEqual([...MACHINE_NAMES]);
    } finally {
      await ui.close();
    }
  });

  it("serves the page and its assets, and nothing outside the public folder", async () => {
    const page = await api("/");
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    expect(await page.text()).toContain('data-testid="transcript"');
    expect((await api("/app.js")).headers.get("content-type")).toMatch(/^text\/javascript/);
    expect((await api("/style.css")).headers.get("content-type")).toMatch(/^text\/css/);
    expect((await api("/missing.js")).status).toBe(404);
    // Encoded so that no client normalises it away: resolves to the repository's package.json.
    expect(await rawStatus("/..%2f..%2f..%2fpackage.json")).toBe(404);
    expect(await rawStatus("/../../../package.json")).toBe(404);
  });
});

describe("with a JetStream event log", () => {
  it("replays a session's history from the log", async () => {
    const nats = await workerNatsServer();
    const natsBus = await NatsBus.connect({ url: nats.url, name: "ui-server-test" });
    const prefix = `uitest${Date.now().toString(36)}`;
    const ui = await startUiServer({ bus: natsBus, prefix, natsConnection: natsBus.connection });
    try {
      await ensureEventStream(natsBus.connection, { prefix });
      const make = createEventFactory("bot", "s1");
      const events = [
        make({ kind: "ChatStarted", text: "stored" }),
        make({ kind: "ModelTextDelta", delta: "a" }, 1),
        make({ kind: "ModelTextDelta", delta: "b" }, 1),
      ];
      publishEvents(natsBus, prefix, [
        ...events,
        createEventFactory("bot", "s2")({ kind: "ChatStarted", text: "x" }),
      ]);
      await natsBus.flush();
      const manager = await jetstreamManager(natsBus.connection);
      await expect
        .poll(async () => (await manager.streams.info(eventStreamName(prefix))).state.messages)
        .toBe(4);
      const body = (await (await fetch(new URL("/api/sessions/bot/s1/events", ui.url))).json()) as {
        source: string;
        events: AgentEvent[];
      };
      expect(body.source).toBe("jetstream");
      expect(body.events).toEqual([events[0], { ...events[2], delta: "ab" }]);
      await manager.streams.delete(eventStreamName(prefix));
    } finally {
      await ui.close();
      await natsBus.close();
      await nats.stop();
    }
  });
});

/** A GET with the path sent exactly as written (fetch would normalise `..`). */
function rawStatus(path: string): Promise<number> {
  const url = new URL(server.url);
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: url.hostname, port: url.port, path, method: "GET" }, (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on("error", reject);
    request.end();
  });
}
