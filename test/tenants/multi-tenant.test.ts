import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, controlSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import {
  killServeProcesses,
  type ServeProcess,
  startServeProcess,
  waitUntilServing,
} from "../host/running-serve.js";
import { runBinary, waitFor } from "../support/cli.js";
import { type NatsServer, startNatsServer } from "../support/nats-server.js";

/**
 * Two tenants as NATS accounts (examples/multi-tenant/nats.conf): one `serve`, logged in as the
 * hosts' user with no tenant list, serves alice's account (tenant A) and bob's (tenant B) on the
 * ordinary subjects of each account, and keeps everything of one apart from the other.
 */

const CONFIG = fileURLToPath(new URL("../../examples/multi-tenant/nats.conf", import.meta.url));

let server: NatsServer;
let directory: string;
let serve: ServeProcess;
let alice: NatsBus;
let bob: NatsBus;
const aliceEvents: AgentEvent[] = [];
const bobEvents: AgentEvent[] = [];

function urlAs(user: string): string {
  return server.url.replace("nats://", `nats://${user}:${user}-pass@`);
}

beforeAll(async () => {
  server = await startNatsServer({ isPrivate: true, args: ["-c", CONFIG] });
  directory = await mkdtemp(join(tmpdir(), "agentloop-tenants-"));
  const agents = join(directory, "agents.json");
  await writeFile(
    agents,
    JSON.stringify({
      agents: [{ name: "assistant", tools: ["current_time"], needsApproval: ["current_time"] }],
      // Bob's tenant may spend one token a day: his first chat runs, the next is refused.
      tenants: { B: { tokenBudget: { tokens: 1, per: "day" } } },
    }),
  );
  serve = startServeProcess([
    "--nats",
    urlAs("host"),
    "--agents",
    agents,
    "--db",
    join(directory, "chats.db"),
  ]);
  alice = await NatsBus.connect({ url: urlAs("alice"), name: "alice" });
  bob = await NatsBus.connect({ url: urlAs("bob"), name: "bob" });
  alice.subscribe("agentloop.events.>", (message) =>
    aliceEvents.push(JSON.parse(message.data) as AgentEvent),
  );
  bob.subscribe("agentloop.events.>", (message) => bobEvents.push(JSON.parse(message.data) as AgentEvent));
  await alice.flush();
  await bob.flush();
  const host = await NatsBus.connect({ url: urlAs("host"), name: "host-side" });
  try {
    await waitUntilServing(host, "agentloop", serve);
  } finally {
    await host.close();
  }
  // Through a service import, a request nobody takes yet is not answered "no responders": it times
  // out. The tenants' subscriptions follow the untenanted ones at once; ask until they answer.
  await untilAnswered(alice);
  await untilAnswered(bob);
}, 60_000);

async function untilAnswered(bus: NatsBus): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      await bus.request(chatSubject("agentloop", "assistant"), "{}", { timeoutMs: 1_000 });
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
  await serve?.run.catch(() => undefined);
  killServeProcesses();
  await server?.stop();
  await rm(directory, { recursive: true, force: true });
});

async function chat(bus: NatsBus, payload: Record<string, unknown>): Promise<Record<string, unknown>> {
  const reply = await bus.request(chatSubject("agentloop", "assistant"), JSON.stringify(payload), {
    timeoutMs: 20_000,
  });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

async function control(bus: NatsBus, payload: Record<string, unknown>): Promise<Record<string, unknown>> {
  const reply = await bus.request(controlSubject("agentloop", "assistant"), JSON.stringify(payload), {
    timeoutMs: 20_000,
  });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

function started(
  events: AgentEvent[],
  text: string,
): Extract<AgentEvent, { kind: "ChatStarted" }> | undefined {
  return events.find(
    (event): event is Extract<AgentEvent, { kind: "ChatStarted" }> =>
      event.kind === "ChatStarted" && event.text === text,
  );
}

describe("tenants as NATS accounts", () => {
  it("keeps sessions, histories, stored replies and events apart; a spent budget refuses before any model request", async () => {
    // Alice: two chats in s1, the first with a client id.
    expect(await chat(alice, { session: "s1", text: "alice one", id: "r1" })).toMatchObject({
      ok: true,
      id: "r1",
      result: expect.stringContaining('"alice one"'),
    });
    expect(await chat(alice, { session: "s1", text: "alice two" })).toMatchObject({ ok: true });
    // Bob's s1 with the same id: his own chat runs (not alice's stored reply), on an empty history.
    expect(await chat(bob, { session: "s1", text: "bob one", id: "r1" })).toMatchObject({
      ok: true,
      id: "r1",
      result: expect.stringContaining('"bob one"'),
    });
    await waitFor(
      () => started(bobEvents, "bob one") !== undefined && started(aliceEvents, "alice two") !== undefined,
    );
    expect(started(aliceEvents, "alice two")?.tokenUsed).toBeGreaterThan(0);
    expect(started(bobEvents, "bob one")?.tokenUsed).toBe(0);

    // Bob's budget (1 token a day) is spent: refused, and his events show no model request for it.
    const refused = await chat(bob, { session: "s1", text: "bob two" });
    expect(refused).toMatchObject({ ok: false, error: { code: "budget_exceeded" } });
    // The host's log names the rule, once (a tenant that keeps trying is not logged each time).
    await waitFor(() => serve.stderr().includes("(rule: token-budget)"));
    expect(serve.stderr()).toMatch(
      /^agentloop serve: refused a chat of tenant "B" \(rule: token-budget\): tenant "B" used its budget of 1 tokens per day/m,
    );
    await waitFor(() => bobEvents.some((event) => event.kind === "ChatFailed"));
    const refusedChat = bobEvents.find((event) => event.kind === "ChatFailed")!.chatId;
    expect(
      bobEvents.filter((event) => event.chatId === refusedChat).map((event) => event.kind),
    ).not.toContain("ModelRequest");
    expect(
      bobEvents.filter((event) => event.chatId === refusedChat).map((event) => event.kind),
    ).not.toContain("ModelResponse");
    // Alice's tenant has no budget: she goes on.
    expect(await chat(alice, { session: "s1", text: "alice three" })).toMatchObject({ ok: true });

    // Nobody saw the other's events.
    await alice.flush();
    await bob.flush();
    expect(aliceEvents.length).toBeGreaterThan(0);
    expect(JSON.stringify(bobEvents)).not.toContain("alice");
    expect(JSON.stringify(aliceEvents)).not.toContain("bob");
  });

  it("lets bob neither approve nor stop alice's held tool call: his control addresses his own session", async () => {
    const pending = chat(alice, { session: "s3", text: "what time is it?" });
    await waitFor(() =>
      aliceEvents.some((event) => event.kind === "ToolApprovalRequested" && event.session === "s3"),
    );
    const request = aliceEvents.find(
      (event): event is Extract<AgentEvent, { kind: "ToolApprovalRequested" }> =>
        event.kind === "ToolApprovalRequested" && event.session === "s3",
    )!;
    const approve = await control(bob, { session: "s3", command: "approve", toolCallId: request.toolCallId });
    expect(approve).toMatchObject({ ok: false, error: { code: "bad_request" } });
    expect(await control(bob, { session: "s3", command: "stop" })).toEqual({ ok: true });
    expect(bobEvents.some((event) => event.kind === "ToolApprovalRequested")).toBe(false);
    // Alice's call is still held: her own approval runs it.
    expect(
      await control(alice, { session: "s3", command: "approve", toolCallId: request.toolCallId }),
    ).toEqual({
      ok: true,
    });
    expect(await pending).toMatchObject({ ok: true, result: expect.stringContaining("The current time is") });
  });

  it("serves the ordinary CLI in a tenant's account", async () => {
    const run = await runBinary(
      ["chat", "--nats", urlAs("alice"), "--session", "cli", "hello from the CLI"],
      {
        timeoutMs: 30_000,
      },
    );
    expect(run).toMatchObject({ code: 0, stdout: expect.stringContaining('"hello from the CLI"') });
    const bobRun = await runBinary(["chat", "--nats", urlAs("bob"), "--session", "cli", "hi"], {
      timeoutMs: 30_000,
    });
    expect(bobRun.code).toBe(1);
    expect(bobRun.stderr).toContain("budget_exceeded");
  });

  it("refuses a request on a malformed tenant subject with bad_request", async () => {
    const host = await NatsBus.connect({ url: urlAs("host"), name: "host-side" });
    try {
      const reply = await host.request(
        "agentloop.tenant.a:b.agents.assistant.chat",
        JSON.stringify({ session: "s", text: "x" }),
        {
          timeoutMs: 10_000,
        },
      );
      expect(JSON.parse(reply.data)).toMatchObject({
        ok: false,
        error: { code: "bad_request", message: expect.stringContaining("invalid tenant name") },
      });
    } finally {
      await host.close();
    }
  });
});
