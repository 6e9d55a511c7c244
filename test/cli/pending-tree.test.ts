import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { ensureEventStream } from "../../src/bus/event-log.js";
import type { HeldToolCallListing } from "../../src/bus/held-tool-calls.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { formatHeldCall, oneEntryPerCall } from "../../src/cli/commands/approvals.js";
import { main } from "../../src/cli/main.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { textOf } from "../../src/llm/types.js";
import { ScriptedBackend, type ScriptedRequest, type ScriptedStep } from "../../src/testing/index.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * `agentloop pending` on an agent tree: lead asks keeper, keeper's call needs approval, so the
 * event log holds it twice (keeper's own request and its copy on lead's session, where it bubbled).
 * pending lists it once, naming both; `approve` on the root decides it.
 */

let server: NatsServer;
let bus: NatsBus;
let host: RunningHost;
let prefix: string;

const openSafe = defineTool({
  name: "open_safe",
  description: "Opens the safe.",
  parameters: z.object({ code: z.string() }),
  needsApproval: true,
  execute: ({ code }) => `safe open with ${code}`,
});

function lastResult(request: ScriptedRequest): string | undefined {
  const last = request.messages.at(-1);
  return last?.role === "tool" ? textOf(last.content as string) : undefined;
}

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "pending-tree-test" });
  prefix = uniqueRoot();
  await ensureEventStream(bus.connection, { prefix });
  host = await startHost({
    bus,
    prefix,
    agents: [
      {
        name: "lead",
        tools: ["ask_agent"],
        backend: new ScriptedBackend((request): ScriptedStep => {
          const result = lastResult(request);
          if (result !== undefined) return { text: `keeper says: ${result}` };
          return {
            toolCalls: [{ name: "ask_agent", arguments: { agent: "keeper", message: "open the safe" } }],
          };
        }),
      },
      {
        name: "keeper",
        tools: [openSafe],
        backend: new ScriptedBackend((request): ScriptedStep => {
          const result = lastResult(request);
          if (result !== undefined) return { text: result };
          return { toolCalls: [{ name: "open_safe", arguments: { code: "1234" } }] };
        }),
      },
    ],
  });
}, 60_000);

afterAll(async () => {
  await host?.close();
  await bus?.close();
  await server?.stop();
});

async function cli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const sink = (write: (text: string) => void) => {
    const stream = new PassThrough();
    stream.on("data", (chunk: Buffer) => write(chunk.toString()));
    return stream;
  };
  const out = sink((text) => {
    stdout += text;
  });
  const err = sink((text) => {
    stderr += text;
  });
  const code = await main([...args, "--nats", server.url, "--prefix", prefix], {
    stdout: out,
    stderr: err,
    stdin: new PassThrough(),
    env: { PATH: process.env.PATH ?? "" },
    signal: new AbortController().signal,
  });
  await new Promise((resolve) => setImmediate(resolve));
  return { code, stdout, stderr };
}

/** Until `condition` holds (the log is read anew each time), at most 30 s. */
async function poll(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("the condition never held");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const lines = (text: string) => text.split("\n").filter((line) => line !== "");

describe("agentloop pending on an agent tree", () => {
  it(
    "lists a call held inside an ask_agent chain once, naming its holder and its root",
    {
      timeout: 60_000,
    },
    async () => {
      const reply = bus.request(chatSubject(prefix, "lead"), JSON.stringify({ session: "s1", text: "go" }), {
        timeoutMs: 60_000,
      });
      // Both records are in the log: the holder's own, and its copy on the root's session.
      let listed: Array<Record<string, unknown>> = [];
      await poll(async () => {
        const rootCopy = lines((await cli(["pending", "--agent", "lead"])).stdout);
        const run = await cli(["pending", "--json"]);
        listed = lines(run.stdout).map((line) => JSON.parse(line) as Record<string, unknown>);
        return rootCopy.length === 1 && listed.length > 0;
      });
      expect(listed).toEqual([
        expect.objectContaining({
          agent: "keeper",
          session: "lead-s1",
          toolName: "open_safe",
          arguments: '{"code":"1234"}',
          root: expect.objectContaining({ agent: "lead", session: "s1" }),
        }),
      ]);
      const text = await cli(["pending"]);
      expect(text.code).toBe(0);
      expect(lines(text.stdout)).toEqual([
        expect.stringMatching(
          new RegExp(
            `^keeper/lead-s1  ${String(listed[0]!.toolCallId)}  open_safe\\(\\{"code":"1234"\\}\\)  waiting \\d+s  root lead/s1`,
          ),
        ),
      ]);
      // Only the root's agent: its copy, naming the holder.
      const leadOnly = await cli(["pending", "--agent", "lead"]);
      expect(lines(leadOnly.stdout)).toEqual([
        expect.stringMatching(
          /^lead\/s1 {2}\S+ {2}open_safe\(\{"code":"1234"\}\) {2}waiting \d+s {2}held by keeper\/lead-s1/,
        ),
      ]);

      // Decided from the root, as the line says it may be.
      const approved = await cli(["approve", "lead", "s1"]);
      expect(approved.stderr).toBe("");
      expect(approved.code).toBe(0);
      expect(JSON.parse((await reply).data)).toMatchObject({
        ok: true,
        result: "keeper says: safe open with 1234",
      });
      await poll(async () => (await cli(["pending"])).stdout.startsWith("no tool calls wait"));
    },
  );
});

describe("oneEntryPerCall", () => {
  const holder: HeldToolCallListing = {
    agent: "keeper",
    session: "lead-s1",
    chatId: "k1",
    toolCallId: "c1",
    toolName: "open_safe",
    arguments: "{}",
    requestedAt: "2026-01-01T00:00:00.000Z",
    root: { agent: "lead", session: "s1", chatId: "r1" },
  };
  const copy: HeldToolCallListing = {
    ...holder,
    agent: "lead",
    session: "s1",
    chatId: "r1",
    root: undefined,
    heldBy: { agent: "keeper", session: "lead-s1", chatId: "k1" },
  };
  const own: HeldToolCallListing = { ...holder, agent: "solo", session: "s9", chatId: "x", root: undefined };

  it("drops a root's copy when its holder is listed, keeps it otherwise, in order", () => {
    expect(oneEntryPerCall([holder, copy, own])).toEqual([holder, own]);
    expect(oneEntryPerCall([copy, own])).toEqual([copy, own]);
    // A copy of another call with the same id (another holder chat) is not folded into this one.
    const other = { ...copy, heldBy: { agent: "keeper", session: "lead-s1", chatId: "k2" } };
    expect(oneEntryPerCall([holder, other])).toEqual([holder, other]);
  });

  it("names the root on the holder's line and the holder on the copy's", () => {
    const now = Date.parse(holder.requestedAt) + 5_000;
    expect(formatHeldCall(holder, now)).toBe("keeper/lead-s1  c1  open_safe({})  waiting 5s  root lead/s1");
    expect(formatHeldCall(copy, now)).toBe("lead/s1  c1  open_safe({})  waiting 5s  held by keeper/lead-s1");
    expect(formatHeldCall(own, now)).toBe("solo/s9  c1  open_safe({})  waiting 5s");
  });
});
