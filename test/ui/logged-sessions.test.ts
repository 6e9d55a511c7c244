import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { ScriptedBackend } from "../../src/testing/index.js";
import { listLoggedSessions } from "../../src/ui/logged-sessions.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * A call held for approval stays reachable: a UI started after the chat's requester went away lists
 * the session from the event log, flags it as waiting, and approving it from there lets the chat end.
 */

let server: NatsServer;
let bus: NatsBus;
let host: RunningHost;
let ui: UiServer | undefined;
const prefix = uniqueRoot();

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "logged-sessions" });
  const backend = new ScriptedBackend((request) => {
    const last = request.messages.at(-1);
    if (last?.role === "tool") return { text: "It is noon." };
    if (last?.content === "hi") return { text: "Hello." };
    return { toolCalls: [{ id: "call_1", name: "current_time" }] };
  });
  host = await startHost({
    bus,
    prefix,
    agents: [{ name: "clock", tools: ["current_time"], needsApproval: ["current_time"], backend }],
  });
});

afterAll(async () => {
  await ui?.close();
  await host?.close();
  await bus?.close();
  await server?.stop();
});

async function sessionsOf(path: string): Promise<Array<Record<string, unknown>>> {
  const response = await fetch(new URL(path, ui!.url));
  expect(response.status).toBe(200);
  return ((await response.json()) as { sessions: Array<Record<string, unknown>> }).sessions;
}

async function until<T>(read: () => Promise<T>, isDone: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await read();
    if (isDone(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("sessions the UI did not see live", () => {
  it("lists them from the event log, flags a held call, and a decision from there ends the chat", async () => {
    // A quiet session first: it must be listed, and not as waiting.
    const quiet = await bus.request(
      chatSubject(prefix, "clock"),
      JSON.stringify({ session: "quiet", text: "hi" }),
      { timeoutMs: 15_000 },
    );
    expect(JSON.parse(quiet.data)).toMatchObject({ ok: true, result: "Hello." });
    // The requester of the held chat gives up long before anyone decides.
    await expect(
      bus.request(chatSubject(prefix, "clock"), JSON.stringify({ session: "held", text: "time?" }), {
        timeoutMs: 300,
      }),
    ).rejects.toThrow();
    const logged = await until(
      () => listLoggedSessions(bus.connection, { prefix }),
      (sessions) => sessions.some((entry) => entry.session === "held" && entry.waitingApprovals === 1),
    );
    expect(logged).toEqual(
      expect.arrayContaining([
        { agent: "clock", session: "held", chats: 1, waitingApprovals: 1 },
        expect.objectContaining({ agent: "clock", session: "quiet", waitingApprovals: 0 }),
      ]),
    );

    ui = await startUiServer({ bus, prefix, natsConnection: bus.connection });
    const waiting = await sessionsOf("/api/sessions?waiting=1");
    expect(waiting).toEqual([
      expect.objectContaining({ agent: "clock", session: "held", waitingApprovals: 1, seenLive: false }),
    ]);
    const approve = await fetch(new URL("/api/control", ui.url), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ agent: "clock", session: "held", command: "approve", toolCallId: "call_1" }),
    });
    expect(await approve.json()).toMatchObject({ ok: true });
    const after = await until(
      () => sessionsOf("/api/sessions"),
      (sessions) => sessions.some((entry) => entry.session === "held" && entry.status === "completed"),
    );
    expect(after.find((entry) => entry.session === "held")).toMatchObject({
      status: "completed",
      waitingApprovals: 0,
    });
    expect(await sessionsOf("/api/sessions?waiting=1")).toEqual([]);
  });
});
