import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { pinDatabase, statement } from "../../src/context/sqlite-statements.js";
import { type AnthropicEvent, anthropicSse, type FakeResponse, turn } from "../../src/testing/index.js";
import {
  callableTools,
  conversationText,
  type FakeProvider,
  HOSTED_PROVIDERS,
  type HostedProvider,
  parseJsonl,
  providerError,
  runBinary,
  runCli,
  startFakeProvider,
  textTurn,
  toolResults,
} from "../support/cli.js";

/**
 * History in SQLite across processes: a tool loop restored by a second process, Anthropic thinking
 * restored with its signatures, compaction replacing the history with one user message, a failed
 * compaction losing nothing, and a final-turn tool call that must not leave a dangling call behind.
 * The restoring run is a real process (dist/) where restoring is the point; the other runs use
 * `main()` in this process (a run keeps nothing in memory: each opens the file anew).
 */

let fake: FakeProvider | undefined;
let directory: string | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
  if (directory) rmSync(directory, { recursive: true, force: true });
  directory = undefined;
});

type Body = Record<string, unknown>;

function dbPath(): string {
  directory = mkdtempSync(join(tmpdir(), "agentloop-history-"));
  return join(directory, "history.db");
}

/** The stored messages of one session, in order (read straight from the file). */
function storedMessages(path: string, session: string, agent = "assistant"): Array<Record<string, unknown>> {
  const database = pinDatabase(new Database(path, { readonly: true }));
  try {
    const rows = statement(
      database,
      "SELECT message FROM messages WHERE agent = ? AND session = ? ORDER BY position",
    ).all(agent, session) as Array<{ message: string }>;
    return rows.map((row) => JSON.parse(row.message) as Record<string, unknown>);
  } finally {
    database.close();
  }
}

function textOfStored(message: Record<string, unknown> | undefined): string {
  const content = message?.content;
  if (typeof content === "string") return content;
  return Array.isArray(content) ? content.map((part: { text?: string }) => part.text ?? "").join("") : "";
}

/** Every tool call in a request has its result, and every result its call. */
function expectNoDanglingCalls(provider: HostedProvider, body: Body) {
  const results = toolResults(provider, body).map((result) => result.callId);
  let calls: string[];
  if (provider === "anthropic") {
    calls = (body.messages as Array<{ content: Body[] | string }>)
      .flatMap((message) => (Array.isArray(message.content) ? message.content : []))
      .filter((block) => block.type === "tool_use")
      .map((block) => String(block.id));
  } else if (provider === "openai-chat") {
    calls = (body.messages as Body[]).flatMap((message) =>
      ((message.tool_calls as Body[] | undefined) ?? []).map((call) => String(call.id)),
    );
  } else {
    calls = (body.input as Body[])
      .filter((item) => item.type === "function_call")
      .map((item) => String(item.call_id));
  }
  expect(results.sort()).toEqual(calls.sort());
}

describe.each(HOSTED_PROVIDERS)("history across two processes (--provider %s)", (provider) => {
  it("a tool loop is restored by the next process with calls and results paired and in order", async () => {
    const db = dbPath();
    fake = await startFakeProvider(provider, [
      turn({ toolCalls: [{ id: "call_clock_1", name: "current_time", arguments: "{}" }] }),
      textTurn("It is noon."),
      textTurn("I told you: noon."),
    ]);
    const args = ["chat", "--local", ...fake.flags, "--db", db, "--session", "tools"];
    const first = await runCli([...args, "What time is it?"], { env: fake.env });
    expect(first).toEqual({ code: 0, stdout: "It is noon.\n", stderr: "" });
    const stored = storedMessages(db, "tools");
    expect(stored.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(stored.some((message) => message.role === "system")).toBe(false);

    const second = await runBinary([...args, "What did you say?"], { env: fake.env });
    expect(second).toEqual({ code: 0, stdout: "I told you: noon.\n", stderr: "" });
    const bodies = fake.bodies();
    expect(bodies).toHaveLength(3);
    const third = bodies[2]!;
    expect(toolResults(provider, third)).toEqual(toolResults(provider, bodies[1]!));
    expectNoDanglingCalls(provider, third);
    const text = conversationText(third);
    const order = ["What time is it?", "call_clock_1", "It is noon.", "What did you say?"].map((part) =>
      text.indexOf(part),
    );
    expect(order.every((index) => index >= 0)).toBe(true);
    expect(order).toEqual([...order].sort((a, b) => a - b));
  });

  it("a tool call the model makes on the final turn anyway is not persisted as a dangling call", async () => {
    const db = dbPath();
    const call = (id: string) => ({ id, name: "current_time", arguments: "{}" });
    fake = await startFakeProvider(provider, [
      turn({ toolCalls: [call("call_a")] }),
      turn({ text: "Let me check again.", toolCalls: [call("call_b")] }),
      textTurn("Next."),
    ]);
    const args = ["chat", "--local", ...fake.flags, "--db", db, "--session", "cap"];
    const first = await runCli([...args, "--max-iterations", "2", "time?"], { env: fake.env });
    expect(first).toEqual({ code: 0, stdout: "Let me check again.\n", stderr: "" });
    const second = await runCli([...args, "again"], { env: fake.env });
    expect(second).toEqual({ code: 0, stdout: "Next.\n", stderr: "" });
    expectNoDanglingCalls(provider, fake.bodies()[2]!);
  });

  it("a chat that fails after a tool turn leaves a history the next process can send (no dangling call)", async () => {
    const db = dbPath();
    fake = await startFakeProvider(provider, [
      turn({ toolCalls: [{ id: "call_fail", name: "current_time", arguments: "{}" }] }),
      providerError(provider, 400, "something is off"),
      textTurn("Recovered."),
    ]);
    const args = ["chat", "--local", ...fake.flags, "--db", db, "--session", "failed"];
    const first = await runCli([...args, "time?"], { env: fake.env });
    expect(first.code).toBe(1);
    const second = await runCli([...args, "again"], { env: fake.env });
    expect(second).toEqual({ code: 0, stdout: "Recovered.\n", stderr: "" });
    const third = fake.bodies()[2]!;
    expectNoDanglingCalls(provider, third);
    expect(conversationText(third)).toContain("again");
  });

  it("compaction replaces the history with exactly one user message holding the summary", async () => {
    const db = dbPath();
    const summary = "Summary: the user is Ada and likes tea.";
    fake = await startFakeProvider(provider, [
      turn({ text: "Nice to meet you, Ada.", usage: { prompt: 40, completion: 10 } }),
      turn({ text: summary, usage: { prompt: 60, completion: 12 } }),
      textTurn("You are Ada."),
    ]);
    const base = ["chat", "--local", ...fake.flags, "--db", db, "--session", "s1"];
    const first = await runCli(
      [...base, "--context-window", "60", "--events", "jsonl", "I am Ada, I like tea."],
      {
        env: fake.env,
      },
    );
    expect(first.stderr).toBe("");
    expect(first.code).toBe(0);
    const { events, last } = parseJsonl(first.stdout);
    expect(last.result).toBe("Nice to meet you, Ada.");
    expect(events.flatMap((event) => (event.kind === "ContextCompaction" ? [event.phase] : []))).toEqual([
      "started",
      "completed",
    ]);
    // Billing usage counts every request the chat made, the compaction request included.
    expect(last.usage).toMatchObject({ prompt: 100, completion: 22, total: 122 });

    const bodies = fake.bodies();
    expect(bodies).toHaveLength(2);
    const compaction = bodies[1]!;
    expect(callableTools(provider, compaction)).toEqual([]);
    expect(conversationText(compaction)).toContain("I am Ada, I like tea.");
    expect(conversationText(compaction)).toContain("Nice to meet you, Ada.");

    const stored = storedMessages(db, "s1");
    expect(stored).toHaveLength(1);
    expect(stored[0]?.role).toBe("user");
    expect(textOfStored(stored[0])).toContain(summary);
    expect(stored[0]?.toolCalls).toBeUndefined();

    const second = await runCli([...base, "Who am I?"], { env: fake.env });
    expect(second).toEqual({ code: 0, stdout: "You are Ada.\n", stderr: "" });
    const third = fake.bodies()[2]!;
    const text = conversationText(third);
    expect(text).toContain(summary);
    expect(text).not.toContain("Nice to meet you");
    expect(text.indexOf(summary)).toBeLessThan(text.indexOf("Who am I?"));
  });

  it("compaction after a tool loop: the summary request cannot call tools and the history holds only the summary", async () => {
    const db = dbPath();
    fake = await startFakeProvider(provider, [
      turn({ toolCalls: [{ id: "call_clock", name: "current_time", arguments: "{}" }] }),
      textTurn("It is noon."),
      textTurn("Summary: asked the time; it was noon."),
    ]);
    const run = await runCli(
      ["chat", "--local", ...fake.flags, "--db", db, "--session", "c2", "--context-window", "10", "time?"],
      { env: fake.env },
    );
    expect(run).toEqual({ code: 0, stdout: "It is noon.\n", stderr: "" });
    const bodies = fake.bodies();
    expect(bodies).toHaveLength(3);
    const compaction = bodies[2]!;
    expect(callableTools(provider, compaction)).toEqual([]);
    expectNoDanglingCalls(provider, compaction);
    if (provider === "anthropic") {
      // A request whose history holds tool_use blocks must define tools.
      expect(Array.isArray(compaction.tools) && compaction.tools.length > 0).toBe(true);
    }
    const stored = storedMessages(db, "c2");
    expect(stored.map((message) => message.role)).toEqual(["user"]);
    expect(textOfStored(stored[0])).toContain("Summary: asked the time; it was noon.");
  });

  it("an empty summary fails the compaction and loses nothing: the exchange stays in the history", async () => {
    const db = dbPath();
    fake = await startFakeProvider(provider, [textTurn("Noted: 42."), turn({}), textTurn("42.")]);
    const base = ["chat", "--local", ...fake.flags, "--db", db, "--session", "s3"];
    const first = await runCli([...base, "--context-window", "10", "--events", "jsonl", "Remember 42."], {
      env: fake.env,
    });
    expect(first.code).toBe(0);
    const { events, last } = parseJsonl(first.stdout);
    expect(last.result).toBe("Noted: 42.");
    expect(events.flatMap((event) => (event.kind === "ContextCompaction" ? [event.phase] : []))).toEqual([
      "started",
      "failed",
    ]);
    const stored = storedMessages(db, "s3");
    expect(stored.map((message) => message.role)).toEqual(["user", "assistant"]);
    expect(textOfStored(stored[0])).toContain("Remember 42.");
    expect(textOfStored(stored[1])).toBe("Noted: 42.");

    const second = await runCli([...base, "What number?"], { env: fake.env });
    expect(second.code).toBe(0);
    const text = conversationText(fake.bodies()[2]!);
    expect(text).toContain("Remember 42.");
    expect(text).toContain("Noted: 42.");
  });
});

describe("anthropic thinking restored from history", () => {
  const SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds9lKnKsgPV2v";
  const REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP";

  function thinkingToolTurn(): FakeResponse {
    const events: AnthropicEvent[] = [
      {
        type: "message_start",
        message: {
          id: "msg_01",
          type: "message",
          role: "assistant",
          model: "claude-sonnet-4-5-20250929",
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: {
            input_tokens: 50,
            output_tokens: 1,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 0,
          },
        },
      },
      {
        type: "content_block_start",
        index: 0,
        content_block: { type: "thinking", thinking: "", signature: "" },
      },
      {
        type: "content_block_delta",
        index: 0,
        delta: { type: "thinking_delta", thinking: "Need the clock." },
      },
      { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: SIGNATURE } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "redacted_thinking", data: REDACTED } },
      { type: "content_block_stop", index: 1 },
      {
        type: "content_block_start",
        index: 2,
        content_block: { type: "tool_use", id: "toolu_clock", name: "current_time", input: {} },
      },
      { type: "content_block_delta", index: 2, delta: { type: "input_json_delta", partial_json: "{}" } },
      { type: "content_block_stop", index: 2 },
      {
        type: "message_delta",
        delta: { stop_reason: "tool_use", stop_sequence: null },
        usage: { output_tokens: 30 },
      },
      { type: "message_stop" },
    ];
    return { type: "sse", frames: anthropicSse(events) };
  }

  it("the second process replays the first one's thinking blocks verbatim before its tool_use", async () => {
    const db = dbPath();
    fake = await startFakeProvider("anthropic", [
      thinkingToolTurn(),
      textTurn("Noon."),
      textTurn("Still noon."),
    ]);
    const args = [
      "chat",
      "--local",
      ...fake.flags,
      "--model",
      "claude-sonnet-4-5-20250929",
      "--reasoning-effort",
      "low",
      "--db",
      db,
      "--session",
      "think",
    ];
    expect(await runCli([...args, "time?"], { env: fake.env })).toEqual({
      code: 0,
      stdout: "Noon.\n",
      stderr: "",
    });
    expect(await runBinary([...args, "and now?"], { env: fake.env })).toEqual({
      code: 0,
      stdout: "Still noon.\n",
      stderr: "",
    });
    const bodies = fake.bodies();
    expect(bodies).toHaveLength(3);
    const replayed = (bodies[2]!.messages as Array<{ role: string; content: Body[] }>).find(
      (message) => message.role === "assistant",
    );
    expect(replayed?.content).toEqual([
      { type: "thinking", thinking: "Need the clock.", signature: SIGNATURE },
      { type: "redacted_thinking", data: REDACTED },
      { type: "tool_use", id: "toolu_clock", name: "current_time", input: {} },
    ]);
    expect(bodies[2]!.thinking).toMatchObject({ type: "enabled" });
  });
});
