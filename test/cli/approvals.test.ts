import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Subscription } from "../../src/bus/bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { sessionEventsPattern } from "../../src/bus/subjects.js";
import { parseEventJson } from "../../src/events/parse-event.js";
import type { AgentEvent } from "../../src/events/types.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, startServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, runCli, stackLines, waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Approvals stay reachable after their requester left: a remote `chat` whose tool call waits for
 * approval is interrupted and exits; `agentloop pending` still finds the call (from the event log,
 * whichever host holds it), and `approve` / `deny` decide it, so the chat goes on in the host.
 */

let server: NatsServer;
let bus: NatsBus;
let serve: RunningServe;
let prefix: string;
let directory: string;
const events: AgentEvent[] = [];
let subscription: Subscription;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "approvals-cli-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-approvals-"));
  const agentsFile = join(directory, "agents.json");
  await writeFile(
    agentsFile,
    JSON.stringify({
      agents: [{ name: "assistant", tools: ["current_time"], needsApproval: ["current_time"] }],
    }),
  );
  prefix = uniqueRoot();
  subscription = bus.subscribe(sessionEventsPattern(prefix), (message) => {
    // The host's permission probe publishes an empty payload here at start: not an event.
    const parsed = parseEventJson(message.data);
    if (parsed.status === "known") events.push(parsed.event);
  });
  serve = startServe(["--nats", server.url, "--prefix", prefix, "--agents", agentsFile]);
  await waitUntilServing(bus, prefix, serve);
});

afterAll(async () => {
  subscription.unsubscribe();
  const run = await serve.stop();
  expect(run.code).toBe(0);
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

function cli(args: readonly string[]) {
  return runCli([...args, "--nats", server.url, "--prefix", prefix]);
}

function of(session: string, kind: AgentEvent["kind"]): AgentEvent[] {
  return events.filter((event) => event.session === session && event.kind === kind);
}

/** A remote chat that asks for the time (the demo model calls current_time), left once it is held. */
async function chatThatLeaves(session: string): Promise<void> {
  const leave = new AbortController();
  const chat = runCli(
    ["chat", "--nats", server.url, "--prefix", prefix, "--session", session, "what time is it?"],
    {
      signal: leave.signal,
    },
  );
  await waitFor(() => of(session, "ToolApprovalRequested").length === 1, 60_000);
  leave.abort();
  const run = await chat;
  expect(run.code).toBe(130);
  // The notice naming `agentloop approve` may not be printed yet when the requester leaves on the
  // event (test/cli/tool-approval-serve.test.ts waits for it); whatever it printed is one line or two.
  expect(run.stderr).not.toMatch(/\n\s+at /);
}

describe("agentloop pending / approve / deny", () => {
  it(
    "finds a call whose requester exited and approves it: the chat finishes in the host",
    { timeout: 60_000 },
    async () => {
      await chatThatLeaves("s1");
      const held = of("s1", "ToolApprovalRequested")[0] as AgentEvent & { toolCallId: string };

      const json = await cli(["pending", "--json"]);
      expect(json.stderr).toBe("");
      expect(json.code).toBe(0);
      const listed = linesOf(json.stdout).map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(listed).toEqual([
        expect.objectContaining({
          agent: "assistant",
          session: "s1",
          toolCallId: held.toolCallId,
          toolName: "current_time",
          chatId: held.chatId,
        }),
      ]);
      const text = await cli(["pending"]);
      expect(linesOf(text.stdout)).toHaveLength(1);
      expect(text.stdout).toMatch(
        new RegExp(`^assistant/s1  ${held.toolCallId}  current_time\\(.*\\)  waiting \\d+s`),
      );

      const approved = await cli(["approve", "assistant", "s1"]);
      expect(approved.stderr).toBe("");
      expect(approved.code).toBe(0);
      expect(approved.stdout).toBe(`approved ${held.toolCallId} current_time({}) in assistant/s1\n`);
      await waitFor(() => of("s1", "ChatCompleted").length === 1, 60_000);
      expect(of("s1", "ToolApprovalResolved")).toEqual([
        expect.objectContaining({ toolCallId: held.toolCallId, approved: true, chatId: held.chatId }),
      ]);
      expect(of("s1", "ToolCallCompleted")).toHaveLength(1);
      expect(of("s1", "ChatCompleted")[0]?.chatId).toBe(held.chatId);

      // Decided: the log no longer lists it, and the session holds nothing to approve.
      expect((await cli(["pending"])).stdout).toMatch(/^no tool calls wait for approval on nats:/);
      const nothing = await cli(["approve", "assistant", "s1"]);
      expect(nothing.code).toBe(1);
      expect(linesOf(nothing.stderr)).toEqual([
        "agentloop approve: no tool call waits for approval in assistant/s1",
      ]);
    },
  );

  it("denies a named call with a reason; --agent filters the listing", { timeout: 60_000 }, async () => {
    await chatThatLeaves("s2");
    const held = of("s2", "ToolApprovalRequested")[0] as AgentEvent & { toolCallId: string };
    expect(linesOf((await cli(["pending", "--agent", "assistant"])).stdout)).toHaveLength(1);
    expect((await cli(["pending", "--agent", "other"])).stdout).toMatch(/^no tool calls wait/);

    const denied = await cli(["deny", "assistant", "s2", held.toolCallId, "--reason", "not now"]);
    expect(denied.stderr).toBe("");
    expect(denied.stdout).toBe(`denied ${held.toolCallId} in assistant/s2\n`);
    await waitFor(() => of("s2", "ChatCompleted").length === 1, 60_000);
    expect(of("s2", "ToolApprovalResolved")).toEqual([
      expect.objectContaining({ approved: false, reason: "not now" }),
    ]);
    expect(of("s2", "ToolCallStarted")).toEqual([]);

    // Deciding it again is the host's bad_request, in one line.
    const again = await cli(["deny", "assistant", "s2", held.toolCallId]);
    expect(again.code).toBe(1);
    expect(linesOf(again.stderr)).toHaveLength(1);
    expect(again.stderr).toMatch(/^agentloop deny: bad_request: /);
  });

  it("refuses bad arguments in one line", async () => {
    for (const args of [
      ["approve"],
      ["approve", "assistant"],
      ["deny", "a b", "s1"],
      ["approve", "a", "s", "c", "d"],
    ]) {
      const run = await cli(args);
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
      expect(linesOf(run.stderr)).toHaveLength(1);
      expect(stackLines(run.stderr)).toEqual([]);
    }
    const noHost = await runCli([
      "approve",
      "assistant",
      "s9",
      "call_1",
      "--nats",
      server.url,
      "--prefix",
      uniqueRoot(),
    ]);
    expect(noHost.code).toBe(1);
    expect(noHost.stderr).toMatch(/^agentloop approve: no agent host serves "assistant"/);
    const noLog = await runCli(["pending", "--nats", server.url, "--prefix", uniqueRoot()]);
    expect(noLog.code).toBe(1);
    expect(linesOf(noLog.stderr)).toEqual([
      expect.stringMatching(
        /^agentloop pending: cannot read the event log \(JetStream\) on nats:.*no host has created it yet$/,
      ),
    ]);
  });
});
