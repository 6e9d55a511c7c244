import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { type AgentDatabase, openAgentDatabase } from "../../src/context/agent-database.js";
import { SqliteContextHistory } from "../../src/context/sqlite-context-history.js";
import { parseEventJson } from "../../src/events/parse-event.js";
import { SessionActor } from "../../src/host/session-actor.js";
import { INTERRUPTED_TOOL_RESULT } from "../../src/journal/resume-plan.js";
import { SqliteChatJournal } from "../../src/journal/sqlite-chat-journal.js";
import type { Message } from "../../src/llm/types.js";
import type { Script } from "../../src/testing/index.js";
import { defineTool, type Tool } from "../../src/tools/define-tool.js";
import { createTestAgent, danglingToolCalls, waitUntil } from "../support/agent-harness.js";
import { storeEntry } from "./journal-helpers.js";

/**
 * A host that stops mid-chat (simulated by abandoning the agent: nothing of it runs again
 * or cleans up) leaves a journal; the session's next life finishes the chat from its last step.
 */

let directory: string;
let database: AgentDatabase;
beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), "agentloop-resume-"));
  database = openAgentDatabase(join(directory, "agents.db"));
});
afterEach(() => {
  database.close();
  rmSync(directory, { recursive: true, force: true });
});

/** An agent of session tester/s1 on the test's database (a "host"). */
function host(script: Script, tools: readonly Tool[]) {
  return createTestAgent({
    script,
    tools,
    history: new SqliteContextHistory({ database, agent: "tester", session: "s1" }),
    journal: new SqliteChatJournal(database),
  });
}

/** A tool that counts its runs; the first run never ends (its host "dies" while it runs). */
function countingTool(name: string, idempotent: boolean) {
  const counter = { runs: 0 };
  const tool = defineTool({
    name,
    description: `A test tool (${name}).`,
    parameters: z.object({}),
    idempotent,
    execute: () => {
      counter.runs += 1;
      return counter.runs === 1 ? new Promise<string>(() => {}) : `${name} ran`;
    },
  });
  return { tool, counter };
}

const stored = () => new SqliteContextHistory({ database, agent: "tester", session: "s1" }).restore();
const lastMessage = (messages: readonly Message[]) => messages[messages.length - 1]!;

describe("resuming a journaled chat", () => {
  it("does not re-run a tool in doubt: the model sees `interrupted`, ToolCallInDoubt is published", async () => {
    const { tool, counter } = countingTool("charge", false);
    const first = await host([{ toolCalls: [{ id: "t1", name: "charge", arguments: "{}" }] }], [tool]);
    void first.agent.chat("pay the bill");
    await waitUntil(() => counter.runs === 1);
    const chatId = first.eventsOf("ChatStarted")[0]!.chatId;

    const seen: Message[][] = [];
    const second = await host(
      (request) => {
        seen.push(request.messages);
        return { text: "The payment may or may not have gone through; please check." };
      },
      [tool],
    );
    expect(await second.agent.resumeUnfinishedChat?.()).toBe(true);

    expect(counter.runs).toBe(1);
    expect(lastMessage(seen[0]!)).toEqual({
      role: "tool",
      toolCallId: "t1",
      toolName: "charge",
      content: INTERRUPTED_TOOL_RESULT,
    });
    expect(second.eventsOf("ChatResumed")).toMatchObject([{ chatId, step: "tools", fromIteration: 1 }]);
    expect(second.eventsOf("ToolCallInDoubt")).toMatchObject([
      { chatId, toolCallId: "t1", toolName: "charge", arguments: "{}" },
    ]);
    expect(second.eventsOf("ToolCallStarted")).toEqual([]);
    expect(second.eventsOf("ChatCompleted")).toMatchObject([{ chatId }]);
    // The resume's own kinds are valid events for every reader (one parser, src/events).
    for (const event of [...second.eventsOf("ChatResumed"), ...second.eventsOf("ToolCallInDoubt")]) {
      expect(parseEventJson(JSON.stringify(event))).toMatchObject({ status: "known" });
    }
    const history = await stored();
    expect(history.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(danglingToolCalls(history)).toEqual([]);
    expect(await new SqliteChatJournal(database).load("tester", "s1")).toBeUndefined();
  });

  it("re-runs an idempotent tool's call and a call that never started", async () => {
    const { tool: lookup, counter } = countingTool("lookup", true);
    const { tool: send, counter: sends } = countingTool("send", false);
    // One batch, at most one call at a time: `send` never started when the host died.
    const first = await createTestAgent({
      script: [
        {
          toolCalls: [
            { id: "t1", name: "lookup", arguments: "{}" },
            { id: "t2", name: "send", arguments: "{}" },
          ],
        },
      ],
      tools: [lookup, send],
      history: new SqliteContextHistory({ database, agent: "tester", session: "s1" }),
      journal: new SqliteChatJournal(database),
      options: { maxConcurrentToolCalls: 1 },
    });
    void first.agent.chat("look it up, then send it");
    await waitUntil(() => counter.runs === 1);

    const seen: Message[][] = [];
    const second = await host(
      (request) => {
        seen.push(request.messages);
        return { text: "Done." };
      },
      [lookup, send],
    );
    sends.runs = 1; // from here on `send` finishes at once
    expect(await second.agent.resumeUnfinishedChat?.()).toBe(true);

    expect(counter.runs).toBe(2);
    expect(sends.runs).toBe(2);
    expect(second.eventsOf("ToolCallInDoubt")).toEqual([]);
    expect(
      second
        .eventsOf("ToolCallCompleted")
        .map((event) => event.toolCallId)
        .sort(),
    ).toEqual(["t1", "t2"]);
    expect(seen[0]!.slice(-2).map((message) => message.content)).toEqual(["lookup ran", "send ran"]);
    const history = await stored();
    expect(history.map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "tool",
      "assistant",
    ]);
    expect(danglingToolCalls(history)).toEqual([]);
  });

  it("asks the model again when the host died mid-stream", async () => {
    const abort = new AbortController();
    const first = await host([{ text: "Never finished", delayMs: 600_000 }], []);
    const running = first.agent.chat("hello", { signal: abort.signal }).catch(() => undefined);
    await waitUntil(() => first.eventsOf("ModelRequest").length === 1);
    const chatId = first.eventsOf("ChatStarted")[0]!.chatId;

    const seen: Message[][] = [];
    const second = await host((request) => {
      seen.push(request.messages);
      return { text: "Hello!" };
    }, []);
    expect(await second.agent.resumeUnfinishedChat?.()).toBe(true);

    expect(second.eventsOf("ChatResumed")).toMatchObject([{ chatId, step: "model", fromIteration: 1 }]);
    expect(seen[0]!.map((message) => message.role)).toEqual(["system", "user"]);
    expect(await stored()).toEqual([
      { role: "user", content: "hello" },
      { role: "assistant", content: "Hello!" },
    ]);
    // A resumed session has nothing more to resume.
    expect(await second.agent.resumeUnfinishedChat?.()).toBe(false);
    abort.abort();
    await running;
  });

  it("leaves a chat cut off because another host takes the session over to that host; a plain shutdown ends it", async () => {
    for (const code of ["unavailable", "cancelled"] as const) {
      database.close();
      rmSync(directory, { recursive: true, force: true });
      directory = mkdtempSync(join(tmpdir(), "agentloop-resume-"));
      database = openAgentDatabase(join(directory, "agents.db"));
      const first = await host([{ text: "Never finished", delayMs: 600_000 }], []);
      const firstSession = new SessionActor({ agent: first.agent });
      const answer = firstSession.chat({ text: "hello" });
      await waitUntil(() => first.eventsOf("ModelRequest").length === 1);
      await firstSession.shutdown("its shard is handed to another host", code);
      expect(await answer).toMatchObject({ ok: false, error: { code } });
      await first.agent.journal?.flush();

      const second = await host([{ text: "Hello!" }], []);
      const resumed = await second.agent.resumeUnfinishedChat?.();
      if (code === "unavailable") {
        expect(resumed).toBe(true);
        expect(lastMessage(await stored())).toEqual({ role: "assistant", content: "Hello!" });
      } else {
        expect(resumed).toBe(false);
        expect(second.eventsOf("ChatResumed")).toEqual([]);
      }
    }
  });

  it("resumes nothing once the chat finished", async () => {
    const first = await host([{ text: "Hi." }], []);
    await first.agent.chat("hello");
    const second = await host([], []);
    expect(await second.agent.resumeUnfinishedChat?.()).toBe(false);
    expect(second.eventsOf("ChatResumed")).toEqual([]);
  });

  it("runs the chats still queued in the mailbox after the resumed one, in order", async () => {
    const { tool, counter } = countingTool("charge", false);
    const first = await host([{ toolCalls: [{ id: "t1", name: "charge", arguments: "{}" }] }], [tool]);
    const firstSession = new SessionActor({ agent: first.agent });
    void firstSession.chat({ text: "one" });
    void firstSession.chat({ text: "two" });
    void firstSession.chat({ text: "three" });
    await waitUntil(() => counter.runs === 1);
    await first.agent.journal?.flush();
    expect((await new SqliteChatJournal(database).load("tester", "s1"))?.queued.map((q) => q.text)).toEqual([
      "two",
      "three",
    ]);

    const second = await host((request) => ({ text: `answer ${request.messages.length}` }), [tool]);
    const secondSession = new SessionActor({ agent: second.agent });
    await secondSession.resumeUnfinished();
    await waitUntil(() => second.eventsOf("ChatCompleted").length === 3);
    await secondSession.whenIdle();

    const history = await stored();
    expect(history.filter((message) => message.role === "user").map((message) => message.content)).toEqual([
      "one",
      "two",
      "three",
    ]);
    expect(history.map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
      "assistant",
      "user",
      "assistant",
    ]);
    expect(danglingToolCalls(history)).toEqual([]);
    await second.agent.journal?.flush();
    expect(await new SqliteChatJournal(database).load("tester", "s1")).toBeUndefined();
    await secondSession.shutdown();
  });

  it("hands each resumed chat with a client request id to onResumed, with its answer", async () => {
    const { tool, counter } = countingTool("charge", false);
    const first = await host([{ toolCalls: [{ id: "t1", name: "charge", arguments: "{}" }] }], [tool]);
    const firstSession = new SessionActor({ agent: first.agent });
    void firstSession.chat({ text: "one", requestId: "r1" });
    void firstSession.chat({ text: "two", requestId: "r2" });
    void firstSession.chat({ text: "three" });
    await waitUntil(() => counter.runs === 1);
    await first.agent.journal?.flush();
    const entry = await new SqliteChatJournal(database).load("tester", "s1");
    expect(entry?.chat?.requestId).toBe("r1");
    expect(entry?.queued.map((queued) => queued.requestId)).toEqual(["r2", undefined]);

    const second = await host((request) => ({ text: `answer ${request.messages.length}` }), [tool]);
    const secondSession = new SessionActor({ agent: second.agent });
    const answers = new Map<string, Promise<unknown>>();
    await secondSession.resumeUnfinished({ onResumed: (id, outcome) => answers.set(id, outcome) });
    expect([...answers.keys()]).toEqual(["r1", "r2"]);
    expect(await answers.get("r1")).toMatchObject({ ok: true, result: "answer 4" });
    expect(await answers.get("r2")).toMatchObject({ ok: true, result: "answer 6" });
    await secondSession.whenIdle();
    await secondSession.shutdown();
  });

  it("answers onResumed from the history when the chat had ended and only its journal entry was left", async () => {
    const first = await host([{ text: "Hi." }], []);
    await first.agent.chat("hello");
    const history = await stored();
    await storeEntry(new SqliteChatJournal(database), "tester", "s1", {
      chat: {
        chatId: "c-ended",
        userText: "hello",
        requestId: "r9",
        chatStart: 0,
        iteration: 1,
        messages: history,
        inFlight: null,
      },
      queued: [],
    });
    const second = await host([], []);
    const secondSession = new SessionActor({ agent: second.agent });
    let answer: Promise<unknown> | undefined;
    await secondSession.resumeUnfinished({
      onResumed: (id, outcome) => {
        if (id === "r9") answer = outcome;
      },
    });
    expect(await answer).toMatchObject({ ok: true, result: "Hi.", chatId: "c-ended" });
    expect(second.eventsOf("ChatResumed")).toEqual([]);
    await secondSession.shutdown();
  });

  it("keeps a chat's answer until its reply is stored under its request id; the next life hands it on", async () => {
    const first = await host([{ text: "Hi." }], []);
    const firstSession = new SessionActor({ agent: first.agent });
    expect(await firstSession.chat({ text: "hello", requestId: "r5" })).toMatchObject({ ok: true });
    // The host died before it stored the reply (nobody called forgetAnswer).
    await first.agent.journal?.flush();
    const journal = new SqliteChatJournal(database);
    expect((await journal.load("tester", "s1"))?.answered).toMatchObject([
      { requestId: "r5", result: "Hi." },
    ]);

    const second = await host([], []);
    const secondSession = new SessionActor({ agent: second.agent });
    const answers = new Map<string, Promise<unknown>>();
    await secondSession.resumeUnfinished({ onResumed: (id, outcome) => answers.set(id, outcome) });
    expect(await answers.get("r5")).toMatchObject({ ok: true, result: "Hi." });
    second.agent.journal?.forgetAnswer("r5");
    await second.agent.journal?.flush();
    expect(await journal.load("tester", "s1")).toBeUndefined();
    await secondSession.shutdown();
    await firstSession.shutdown();
  });
});
