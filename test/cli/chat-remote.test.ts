import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, startServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, parseJsonl, runCli, stackLines } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

let server: NatsServer;
let bus: NatsBus;
let serve: RunningServe;
let prefix: string;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "chat-remote-test" });
  prefix = uniqueRoot();
  serve = startServe(["--nats", server.url, "--prefix", prefix]);
  await waitUntilServing(bus, prefix, serve);
});

afterAll(async () => {
  const run = await serve.stop();
  expect(run.code).toBe(0);
  await bus.close();
  await server.stop();
});

function chat(args: readonly string[]) {
  return runCli(["chat", "--nats", server.url, "--prefix", prefix, ...args]);
}

describe("agentloop chat (remote, through a running host)", () => {
  it("--events jsonl prints the chat's events, one per line, then the Result line", async () => {
    const run = await chat(["--session", "r1", "--events", "jsonl", "what time is it?"]);
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const { events, last } = parseJsonl(run.stdout);
    expect(events[0]).toMatchObject({
      kind: "ChatStarted",
      text: "what time is it?",
      agent: "assistant",
      session: "r1",
    });
    expect(new Set(events.map((event) => event.chatId)).size).toBe(1);
    const completed = events.find((event) => event.kind === "ChatCompleted");
    expect(completed).toMatchObject({ result: last.result });
    expect(last.result).toMatch(/^\[demo\] /);
    expect(last.usage).toEqual(
      expect.objectContaining({ prompt: expect.any(Number), total: expect.any(Number) }),
    );
    // The demo model calls current_time when asked for the time: its events are part of the chat.
    expect(events.map((event) => event.kind)).toContain("ToolCallCompleted");
    const deltas = events.flatMap((event) => (event.kind === "ModelTextDelta" ? [event.delta] : []));
    expect(deltas.join("")).toBe(last.result);
  });

  it("--events none prints only the answer; the session keeps its conversation", async () => {
    const first = await chat(["--session", "r2", "my name is Ada"]);
    expect(first.code).toBe(0);
    expect(linesOf(first.stdout)).toHaveLength(1);
    expect(first.stdout).toMatch(/^\[demo\] /);
    const second = await chat(["--session", "r2", "--events", "jsonl", "what did I say?"]);
    const { events } = parseJsonl(second.stdout);
    // The same session: the model was sent the earlier exchange too.
    const request = events.find((event) => event.kind === "ModelRequest");
    expect(request).toMatchObject({ messageCount: expect.any(Number) });
    expect((request as { messageCount: number }).messageCount).toBeGreaterThanOrEqual(4);
  });

  it("--events pretty streams the answer", async () => {
    const run = await chat(["--session", "r3", "--events", "pretty", "hello"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("[demo] ");
  });

  it("fails with one line for an unknown agent, a missing host and an unreachable NATS", async () => {
    const unknown = await chat(["--agent", "ghost", "hi"]);
    expect(unknown.code).toBe(1);
    expect(linesOf(unknown.stderr)).toEqual([
      'agentloop: unknown_agent: no agent named "ghost" (this host serves: assistant)',
    ]);
    const noHost = await runCli(["chat", "--nats", server.url, "--prefix", uniqueRoot(), "hi"]);
    expect(noHost.code).toBe(1);
    expect(linesOf(noHost.stderr)).toHaveLength(1);
    expect(noHost.stderr).toMatch(/^agentloop: no agent host serves "assistant" at nats:/);
    const noNats = await runCli(["chat", "--nats", "nats://127.0.0.1:1", "hi"]);
    expect(noNats.code).toBe(1);
    expect(linesOf(noNats.stderr)).toHaveLength(1);
    expect(noNats.stderr).toMatch(/^agentloop: cannot reach NATS at nats:\/\/127\.0\.0\.1:1/);
    expect(stackLines(noNats.stderr)).toEqual([]);
    // A configuration mistake is the user's to fix: exit 2, for every command that connects.
    for (const args of [
      ["chat", "--nats", "not a url", "hi"],
      ["chat", "--nats", server.url, "--nats-creds", "/nonexistent/agentloop.creds", "hi"],
      ["sessions", "--nats", "not a url"],
      ["agents", "--nats", "not a url"],
      ["tail", "--nats", "not a url"],
      ["tail", "--nats", server.url, "--since", "18446744073709551615"],
    ]) {
      const mistake = await runCli(args);
      expect({ args, code: mistake.code }).toEqual({ args, code: 2 });
      expect(linesOf(mistake.stderr)).toHaveLength(1);
      expect(stackLines(mistake.stderr)).toEqual([]);
    }
  });
});
