import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, controlSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { turn } from "../../src/testing/index.js";
import {
  killServeProcesses,
  type ServeProcess,
  startServeProcess,
  waitUntilServing,
} from "../host/running-serve.js";
import { type FakeProvider, stackLines, startFakeProvider, textTurn, waitFor } from "../support/cli.js";
import { type NatsServer, startNatsServer } from "../support/nats-server.js";

/**
 * A tenant's `maxSessions` (the agents file's `tenants.<T>.maxSessions`), end to end: tenant A
 * may hold one live session. While that one waits for a tool approval (so it is busy and cannot
 * be passivated), A's second session is refused `overloaded` and nothing of it runs; tenant B,
 * on the same host, chats as usual. Once A's first session is done, its second one runs.
 */

const CONFIG = fileURLToPath(new URL("../../examples/multi-tenant/nats.conf", import.meta.url));
const PREFIX = "agentloop";

let server: NatsServer;
let model: FakeProvider;
let directory: string;
let serve: ServeProcess;
let alice: NatsBus;
let bob: NatsBus;
const aliceEvents: AgentEvent[] = [];

function urlAs(user: string): string {
  return server.url.replace("nats://", `nats://${user}:${user}-pass@`);
}

beforeAll(async () => {
  server = await startNatsServer({ isPrivate: true, args: ["-c", CONFIG] });
  // The model's answers in the order they are asked for (see the test).
  model = await startFakeProvider("openai-chat", [
    turn({ toolCalls: [{ id: "call_1", name: "current_time", arguments: "{}" }] }),
    textTurn("Bob's answer."),
    textTurn("It is noon."),
    textTurn("Alice asked the time; it was noon."), // s1's summary as it is passivated
    textTurn("Alice's second session."),
  ]);
  directory = await mkdtemp(join(tmpdir(), "agentloop-tenant-max-sessions-"));
  const agents = join(directory, "agents.json");
  await writeFile(
    agents,
    JSON.stringify({
      agents: [{ name: "assistant", tools: ["current_time"], needsApproval: ["current_time"] }],
      tenants: { A: { maxSessions: 1 } },
    }),
  );
  serve = startServeProcess(
    ["--nats", urlAs("host"), "--agents", agents, "--db", join(directory, "chats.db"), ...model.flags],
    model.env,
  );
  alice = await NatsBus.connect({ url: urlAs("alice"), name: "alice" });
  bob = await NatsBus.connect({ url: urlAs("bob"), name: "bob" });
  alice.subscribe("agentloop.events.>", (message) =>
    aliceEvents.push(JSON.parse(message.data) as AgentEvent),
  );
  await alice.flush();
  const host = await NatsBus.connect({ url: urlAs("host"), name: "host-side" });
  try {
    await waitUntilServing(host, PREFIX, serve);
  } finally {
    await host.close();
  }
  await untilAnswered(alice);
  await untilAnswered(bob);
}, 60_000);

/** Through a service import, a request nobody takes yet times out: ask until the tenant is served. */
async function untilAnswered(bus: NatsBus): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await bus.request(chatSubject(PREFIX, "assistant"), "{}", { timeoutMs: 1_000 });
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
  }
}

afterAll(async () => {
  await alice?.close();
  await bob?.close();
  serve?.child.kill("SIGTERM");
  const run = await serve?.run.catch(() => undefined);
  killServeProcesses();
  await model?.close();
  await server?.stop();
  await rm(directory, { recursive: true, force: true });
  expect(run?.code).toBe(0);
  expect(stackLines(run?.stderr ?? "")).toEqual([]);
  // The refusal named its rule in the host's log.
  expect(run?.stderr).toMatch(
    /^agentloop serve: refused a new session assistant\/s2 \(rule: max-sessions\): the host is at its limit of 1 live session/m,
  );
}, 60_000);

async function request(
  bus: NatsBus,
  verb: "chat" | "control",
  payload: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const subject = verb === "chat" ? chatSubject(PREFIX, "assistant") : controlSubject(PREFIX, "assistant");
  const reply = await bus.request(subject, JSON.stringify(payload), { timeoutMs: 30_000 });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

describe("a tenant's maxSessions", () => {
  it("refuses the tenant's next session overloaded while its one session is busy; the other tenant is unaffected", async () => {
    const held = request(alice, "chat", { session: "s1", text: "what time is it?" });
    // Awaited below; a failure before then must not surface as an unhandled rejection.
    held.catch(() => undefined);
    await waitFor(
      () => aliceEvents.some((event) => event.kind === "ToolApprovalRequested" && event.session === "s1"),
      30_000,
    );

    expect(await request(alice, "chat", { session: "s2", text: "a second session" })).toEqual({
      ok: false,
      error: {
        code: "overloaded",
        message: "the host is at its limit of 1 live session and none is idle; try again later",
      },
    });
    // Refused before it started: no event of s2, and the model was not asked.
    expect(aliceEvents.filter((event) => event.session === "s2")).toEqual([]);
    expect(model.bodies()).toHaveLength(1);

    // Bob's tenant has no such limit: his new session runs meanwhile.
    expect(await request(bob, "chat", { session: "b1", text: "hello" })).toMatchObject({
      ok: true,
      result: "Bob's answer.",
    });

    expect(
      await request(alice, "control", { session: "s1", command: "approve", toolCallId: "call_1" }),
    ).toEqual({ ok: true });
    expect(await held).toMatchObject({ ok: true, session: "s1", result: "It is noon." });

    // s1 is idle now: it makes way (compacted and passivated, its history kept) and s2 runs.
    expect(await request(alice, "chat", { session: "s2", text: "a second session" })).toMatchObject({
      ok: true,
      result: "Alice's second session.",
    });
  }, 90_000);
});
