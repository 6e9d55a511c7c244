import { afterEach, describe, expect, it } from "vitest";
import { turn } from "../../src/testing/index.js";
import {
  callableTools,
  type FakeProvider,
  HOSTED_PROVIDERS,
  type HostedProvider,
  linesOf,
  type ProviderReply,
  parseJsonl,
  providerError,
  runCli,
  stackLines,
  startFakeProvider,
  textTurn,
  toolResults,
  waitFor,
} from "../support/cli.js";

/**
 * `agentloop chat --local` against each provider's fake server: the real SDKs stream from a local
 * HTTP server that plays a scripted conversation, and the tests read what the CLI printed and
 * what it sent.
 */

let fake: FakeProvider | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function chat(provider: HostedProvider, script: readonly ProviderReply[], args: readonly string[]) {
  fake = await startFakeProvider(provider, script);
  const run = await runCli(["chat", "--local", ...fake.flags, ...args], { env: fake.env });
  return { run, bodies: fake.bodies() };
}

const CURRENT_TIME_CALL = { id: "call_1", name: "current_time", arguments: "{}" };

describe.each(HOSTED_PROVIDERS)("chat --local --provider %s", (provider) => {
  it("prints the answer and nothing on stderr", async () => {
    const { run, bodies } = await chat(provider, [textTurn("Hello", ", world!")], ["hi there"]);
    expect(run).toEqual({ code: 0, stdout: "Hello, world!\n", stderr: "" });
    expect(bodies).toHaveLength(1);
    expect(JSON.stringify(bodies[0])).toContain("hi there");
    expect(bodies[0]?.stream).toBe(true);
  });

  it("--events pretty streams the text deltas to stdout as they come", async () => {
    const { run } = await chat(provider, [textTurn("Hel", "lo ", "there")], ["--events", "pretty", "hi"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    expect(run.stdout).toContain("Hello there\n");
    expect(run.stdout).toContain("· user hi\n");
  });

  it("--events jsonl prints one event per line in order, then the Result line", async () => {
    const { run } = await chat(provider, [textTurn("Hello", ", world!")], ["--events", "jsonl", "hi"]);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    const { events, last } = parseJsonl(run.stdout);
    expect(events[0]?.kind).toBe("ChatStarted");
    expect(events.filter((event) => event.kind !== "StateChanged").map((event) => event.kind)).toEqual([
      "ChatStarted",
      "ModelRequest",
      "ModelStreamSegmentStart",
      "ModelTextDelta",
      "ModelTextDelta",
      "ModelResponse",
      "ChatCompleted",
    ]);
    expect(events.flatMap((event) => (event.kind === "ModelTextDelta" ? [event.delta] : [])).join("")).toBe(
      "Hello, world!",
    );
    for (const event of events) {
      expect(event).toMatchObject({ agent: "assistant", session: "default" });
      expect(Number.isNaN(Date.parse(event.ts))).toBe(false);
    }
    const seqs = events.map((event) => event.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(new Set(events.map((event) => event.chatId)).size).toBe(1);

    const usage = { prompt: 10, completion: 5, total: 15, cached: 0 };
    expect(last).toEqual({ kind: "Result", result: "Hello, world!", usage });
    expect(linesOf(run.stdout).at(-1)).toBe(
      JSON.stringify({ kind: "Result", result: "Hello, world!", usage }),
    );
    const completed = events.find((event) => event.kind === "ChatCompleted");
    expect(completed).toMatchObject({ result: "Hello, world!", usage });
    const chatStates = events.flatMap((event) =>
      event.kind === "StateChanged" && event.machine === "chat" ? [JSON.stringify(event.state)] : [],
    );
    expect(chatStates).toContain(JSON.stringify({ iterating: "toolTurn" }));
    expect(chatStates.at(-1)).toBe(JSON.stringify("done"));
  });

  it("runs the current_time tool the model calls and sends its result back", async () => {
    const { run, bodies } = await chat(
      provider,
      [turn({ toolCalls: [CURRENT_TIME_CALL] }), textTurn("It is time.")],
      ["--events", "jsonl", "what time is it?"],
    );
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    expect(bodies).toHaveLength(2);
    expect(callableTools(provider, bodies[0]!).sort()).toEqual(["current_time", "todo_list"]);
    expect(toolResults(provider, bodies[0]!)).toEqual([]);
    const results = toolResults(provider, bodies[1]!);
    expect(results).toHaveLength(1);
    expect(results[0]?.callId).toBe("call_1");
    expect(results[0]?.output).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}[+-]\d{2}:\d{2} \(/);

    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("It is time.");
    expect(events.filter((event) => event.kind !== "StateChanged").map((event) => event.kind)).toEqual([
      "ChatStarted",
      "ModelRequest",
      "ModelResponse",
      "ToolCallStarted",
      "ToolCallCompleted",
      "ModelRequest",
      "ModelStreamSegmentStart",
      "ModelTextDelta",
      "ModelResponse",
      "ChatCompleted",
    ]);
    const started = events.find((event) => event.kind === "ToolCallStarted");
    const completed = events.find((event) => event.kind === "ToolCallCompleted");
    expect(started).toMatchObject({ toolName: "current_time", toolCallId: "call_1", iteration: 1 });
    expect(completed).toMatchObject({
      toolName: "current_time",
      toolCallId: "call_1",
      result: results[0]?.output,
    });
    expect(events.filter((event) => event.kind === "ModelRequest").map((event) => event.iteration)).toEqual([
      1, 2,
    ]);
  });

  it("--max-iterations 1 sends the only request with no callable tools", async () => {
    const { run, bodies } = await chat(
      provider,
      [textTurn("Just text.")],
      ["--max-iterations", "1", "--events", "jsonl", "hi"],
    );
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(1);
    expect(callableTools(provider, bodies[0]!)).toEqual([]);
    const requests = parseJsonl(run.stdout).events.filter((event) => event.kind === "ModelRequest");
    expect(requests).toMatchObject([{ final: true, iteration: 1 }]);
  });

  it("--max-iterations 2: after a tool turn the final request keeps the definitions but forbids calls", async () => {
    const { run, bodies } = await chat(
      provider,
      [turn({ toolCalls: [CURRENT_TIME_CALL] }), textTurn("Done.")],
      ["--max-iterations", "2", "time?"],
    );
    expect(run).toEqual({ code: 0, stdout: "Done.\n", stderr: "" });
    expect(bodies).toHaveLength(2);
    expect(callableTools(provider, bodies[0]!)).toContain("current_time");
    expect(callableTools(provider, bodies[1]!)).toEqual([]);
    expect(Array.isArray(bodies[1]?.tools) && bodies[1].tools.length > 0).toBe(true);
  });

  it("--model and --reasoning-effort reach the request body", async () => {
    const model = provider === "anthropic" ? "claude-sonnet-4-5-20250929" : "gpt-test-model";
    const { run, bodies } = await chat(
      provider,
      [textTurn("ok")],
      ["--model", model, "--reasoning-effort", "high", "hi"],
    );
    expect(run.code).toBe(0);
    const body = bodies[0]!;
    expect(body.model).toBe(model);
    if (provider === "anthropic") {
      expect(body.thinking).toEqual({ type: "enabled", budget_tokens: expect.any(Number) });
    } else if (provider === "openai-chat") {
      expect(body.reasoning_effort).toBe("high");
    } else {
      expect(body.reasoning).toMatchObject({ effort: "high" });
    }
  });

  it("without --reasoning-effort no reasoning setting is sent", async () => {
    const { bodies } = await chat(provider, [textTurn("ok")], ["hi"]);
    const body = bodies[0]!;
    expect(body.thinking).toBeUndefined();
    expect(body.reasoning_effort).toBeUndefined();
    expect(body.reasoning).toBeUndefined();
  });

  it("a tiny --context-window makes the chat compact its context with a no-tools summary request", async () => {
    const { run, bodies } = await chat(
      provider,
      [textTurn("Hi!"), textTurn("Summary: the user said hi.")],
      ["--context-window", "10", "--events", "jsonl", "hi"],
    );
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    expect(bodies).toHaveLength(2);
    expect(bodies[1]?.stream).not.toBe(true);
    expect(callableTools(provider, bodies[1]!)).toEqual([]);
    const { events, last } = parseJsonl(run.stdout);
    expect(last.result).toBe("Hi!");
    expect(events.flatMap((event) => (event.kind === "ContextCompaction" ? [event.phase] : []))).toEqual([
      "started",
      "completed",
    ]);
    // One ModelResponse per request: the chat's streamed answer, then the summary.
    expect(
      events.flatMap((event) => (event.kind === "ModelResponse" ? [[event.purpose, event.iteration]] : [])),
    ).toEqual([
      ["chat", 1],
      ["compaction", 0],
    ]);
  });

  it("a large --context-window does not compact", async () => {
    const { run, bodies } = await chat(provider, [textTurn("Hi!")], ["--context-window", "1000", "hi"]);
    expect(run.code).toBe(0);
    expect(bodies).toHaveLength(1);
  });

  it("a 401 from the provider → exit 1, one line on stderr, no retry", async () => {
    const { run, bodies } = await chat(provider, [providerError(provider, 401, "invalid api key")], ["hi"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe("");
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^agentloop: chat failed: AuthenticationError: .*invalid api key/);
    expect(stackLines(run.stderr)).toEqual([]);
    expect(bodies).toHaveLength(1);
  });

  it("a 500 on every attempt → retried, then exit 1 with one line on stderr", async () => {
    // retry-after-ms: 0 keeps the client's backoff (1 s, then 2 s by default) out of the test.
    const error = providerError(provider, 500, "upstream exploded", { "retry-after-ms": "0" });
    const { run, bodies } = await chat(provider, [error, error, error], ["--events", "jsonl", "hi"]);
    expect(run.code).toBe(1);
    expect(bodies).toHaveLength(3);
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^agentloop: chat failed: ServerError: .*upstream exploded/);
    expect(stackLines(run.stderr)).toEqual([]);
    const kinds = linesOf(run.stdout)
      .map((line) => (JSON.parse(line) as { kind: string }).kind)
      .filter((kind) => kind !== "StateChanged");
    expect(kinds).not.toContain("Result");
    expect(kinds.filter((kind) => kind === "ModelStreamSegmentReset")).toHaveLength(2);
    expect(kinds.at(-1)).toBe("ChatFailed");
  });
});

describe("chat --local cancelled", () => {
  it("aborting the signal (Ctrl-C) while the model is answering → exit 130, one line on stderr", async () => {
    fake = await startFakeProvider("openai-chat", [{ type: "hang" }]);
    const controller = new AbortController();
    const running = runCli(["chat", "--local", ...fake.flags, "--events", "jsonl", "hi"], {
      env: fake.env,
      signal: controller.signal,
    });
    const server = fake;
    await waitFor(() => server.bodies().length === 1);
    controller.abort();
    const run = await running;
    expect(run.code).toBe(130);
    expect(run.stderr).toBe("agentloop: cancelled\n");
    const kinds = linesOf(run.stdout).map((line) => (JSON.parse(line) as { kind: string }).kind);
    expect(kinds).toContain("ChatFailed");
    expect(kinds).not.toContain("Result");
  });
});

describe("chat --local with the demo model", () => {
  it("answers offline with no provider and no key, labelled as the demo", async () => {
    const run = await runCli(["chat", "--local", "hello there"]);
    expect(run.code).toBe(0);
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(run.stderr).toMatch(/^agentloop: .*demo/);
    expect(run.stdout.startsWith("[demo]")).toBe(true);
  });
});
