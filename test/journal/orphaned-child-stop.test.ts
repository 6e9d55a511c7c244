import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { LocalBus } from "../../src/bus/local-bus.js";
import { chatSubject, controlSubject } from "../../src/bus/subjects.js";
import { type AgentDatabase, openAgentDatabase } from "../../src/context/agent-database.js";
import { SqliteContextHistory } from "../../src/context/sqlite-context-history.js";
import { foldJournal } from "../../src/journal/journal-record.js";
import { INTERRUPTED_TOOL_RESULT } from "../../src/journal/resume-plan.js";
import { SqliteChatJournal } from "../../src/journal/sqlite-chat-journal.js";
import type { Script } from "../../src/testing/index.js";
import { createAskAgentToolSet } from "../../src/tools/ask-agent.js";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool } from "../../src/tools/define-tool.js";
import type { ToolSet } from "../../src/tools/tool-set.js";
import { createTestAgent, waitUntil } from "../support/agent-harness.js";

/**
 * A parent whose host dies while its `ask_agent` call waits leaves the asked chat running with
 * nobody to answer: the parent's journal records the chat the call asked, and the chat resumed from
 * it (the call in doubt) sends that chat's session a `stop` on the normal control path.
 */

const PREFIX = "orphans";
/** Long enough that the abandoned parent never gives up on its own while the test runs. */
const PATIENT_MS = 10 * 60_000;

let directory: string;
let database: AgentDatabase;
let bus: LocalBus;
/** What the `helper` agent was sent: its questions (never answered) and its control commands. */
let questions: { session: string; text: string }[];
let controls: { session: string; command: string }[];
const abandoned: { controller: AbortController; chat: Promise<unknown> }[] = [];

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), "agentloop-orphans-"));
  database = openAgentDatabase(join(directory, "agents.db"));
  bus = new LocalBus();
  questions = [];
  controls = [];
  bus.subscribe(chatSubject(PREFIX, "helper"), (message) => {
    questions.push(JSON.parse(message.data) as { session: string; text: string });
  });
  bus.subscribe(controlSubject(PREFIX, "helper"), (message) => {
    controls.push(JSON.parse(message.data) as { session: string; command: string });
    bus.respond(message, JSON.stringify({ ok: true }));
  });
});

afterEach(async () => {
  // The abandoned "dead" parents are let go only now: nothing of them runs during a test.
  const chats = abandoned.splice(0).map(({ controller, chat }) => {
    controller.abort();
    return chat;
  });
  await Promise.allSettled(chats);
  await bus.close();
  database.close();
  rmSync(directory, { recursive: true, force: true });
});

function askAgent(): ToolSet {
  return createAskAgentToolSet({
    bus,
    prefix: PREFIX,
    agent: "tester",
    timeoutMs: PATIENT_MS,
    heartbeatTimeoutMs: PATIENT_MS,
  });
}

/** The parent agent tester/s1 on the test's database (a "host"). */
function parentHost(script: Script, toolSets: ToolSet[]) {
  return createTestAgent({
    script,
    toolSets,
    history: new SqliteContextHistory({ database, agent: "tester", session: "s1" }),
    journal: new SqliteChatJournal(database),
  });
}

/** Starts a chat on `host` that is never finished: its host "dies" (is abandoned) mid-chat. */
function chatThenDie(host: Awaited<ReturnType<typeof parentHost>>, text: string): void {
  const controller = new AbortController();
  const chat = host.agent.chat(text, { signal: controller.signal }).catch(() => {});
  abandoned.push({ controller, chat });
}

const askHelper = {
  id: "a1",
  name: "ask_agent",
  arguments: JSON.stringify({ agent: "helper", message: "dig" }),
};

describe("a parent resumed in doubt", () => {
  it("stops the child chat its call had asked, through the child's control subject", async () => {
    const first = await parentHost([{ toolCalls: [askHelper] }], [askAgent()]);
    chatThenDie(first, "ask the helper");
    await waitUntil(() => questions.length === 1, 30_000);
    expect(questions[0]).toMatchObject({ session: "tester-s1", text: "dig" });
    // The journal holds the asked chat with the call, stored before the question went out.
    const records = await new SqliteChatJournal(database).readRecords("tester", "s1");
    expect(foldJournal(records).entry?.chat?.inFlight?.asked).toEqual({
      a1: { agent: "helper", session: "tester-s1" },
    });
    expect(controls).toEqual([]);

    const second = await parentHost([{ text: "The helper may still have been digging." }], [askAgent()]);
    expect(await second.agent.resumeUnfinishedChat?.()).toBe(true);

    await waitUntil(() => controls.length === 1, 30_000);
    expect(controls).toEqual([{ session: "tester-s1", command: "stop" }]);
    expect(second.eventsOf("ToolCallInDoubt")).toMatchObject([{ toolCallId: "a1", toolName: "ask_agent" }]);
    expect(second.backend.requests[0]?.messages.at(-1)).toMatchObject({
      role: "tool",
      toolCallId: "a1",
      content: INTERRUPTED_TOOL_RESULT,
    });
    expect(second.eventsOf("ChatCompleted")).toHaveLength(1);
    // The question was not asked again.
    expect(questions).toHaveLength(1);
  });

  it("stops nothing for a call in doubt that asked no agent", async () => {
    let runs = 0;
    const hang = defineTool({
      name: "hang",
      description: "Never returns.",
      parameters: z.object({}),
      execute: () => {
        runs++;
        return new Promise<string>(() => {});
      },
    });
    const tools = [createToolSet({ name: "hanging", tools: [hang] }), askAgent()];
    const first = await parentHost([{ toolCalls: [{ id: "h1", name: "hang", arguments: "{}" }] }], tools);
    chatThenDie(first, "hang on");
    await waitUntil(() => runs === 1, 30_000);

    const second = await parentHost([{ text: "It hung." }], tools);
    expect(await second.agent.resumeUnfinishedChat?.()).toBe(true);

    expect(second.eventsOf("ToolCallInDoubt")).toMatchObject([{ toolCallId: "h1" }]);
    expect(second.eventsOf("ChatCompleted")).toHaveLength(1);
    expect(controls).toEqual([]);
  });
});
