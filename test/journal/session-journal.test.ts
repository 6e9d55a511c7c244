import { afterEach, describe, expect, it } from "vitest";
import { type AgentDatabase, openAgentDatabase } from "../../src/context/agent-database.js";
import { statement } from "../../src/context/sqlite-statements.js";
import type { ChatJournal } from "../../src/journal/chat-journal.js";
import type { JournalRecord } from "../../src/journal/journal-record.js";
import { SessionJournal } from "../../src/journal/session-journal.js";
import { SqliteChatJournal } from "../../src/journal/sqlite-chat-journal.js";
import type { Message } from "../../src/llm/types.js";

let databases: AgentDatabase[] = [];
afterEach(() => {
  for (const database of databases) database.close();
  databases = [];
});

function sqliteJournal(): { store: SqliteChatJournal; database: AgentDatabase } {
  const database = openAgentDatabase(":memory:");
  databases.push(database);
  return { store: new SqliteChatJournal(database), database };
}

function assistantCalling(callId: string): Message {
  return { role: "assistant", content: "", toolCalls: [{ id: callId, name: "shell", arguments: "{}" }] };
}

/** One tool step as the chat reports it: the turn, the call's start (awaited), the result. */
async function toolStep(journal: SessionJournal, index: number): Promise<void> {
  journal.record(assistantCalling(`t${index}`));
  await journal.toolStarting(`t${index}`);
  journal.record({ role: "tool", toolCallId: `t${index}`, content: `result ${index}` });
  await journal.flush();
}

async function startedChat(store: ChatJournal, session = "s1"): Promise<SessionJournal> {
  const journal = await SessionJournal.open(store, "bot", session);
  journal.beginChat("c1", "hi", 0, "r1");
  journal.record({ role: "user", content: "hi" });
  await journal.flush();
  return journal;
}

describe("SessionJournal", () => {
  it("appends one record per step and never rewrites one already stored", async () => {
    const { store } = sqliteJournal();
    const journal = await startedChat(store);
    const first = await store.readRecords("bot", "s1");
    // The chat's beginning and its user message, taken in one tick: one record.
    expect(first).toHaveLength(1);
    for (let index = 1; index <= 3; index++) await toolStep(journal, index);
    const records = await store.readRecords("bot", "s1");
    // Per tool step: the turn with its call's start, then the result.
    expect(records.map((record) => record.n)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(records[0]).toEqual(first[0]);
    const second = JSON.parse(records[1]!.text) as JournalRecord;
    expect(second.steps.map((step) => step.kind)).toEqual(["message", "started"]);
    expect(await store.load("bot", "s1")).toEqual({ chat: journal.unfinishedChat, queued: [] });
  });

  it("removes every record once the chat ended and its answer's reply is stored", async () => {
    const { store } = sqliteJournal();
    const journal = await startedChat(store);
    await toolStep(journal, 1);
    journal.endChat({ result: "done", usage: { prompt: 1, completion: 1, total: 2, cached: 0 } });
    await journal.flush();
    expect(await store.load("bot", "s1")).toMatchObject({ chat: null, answered: [{ requestId: "r1" }] });
    journal.forgetAnswer("r1");
    await journal.flush();
    expect(await store.readRecords("bot", "s1")).toEqual([]);
    expect(await store.list()).toEqual([]);
  });

  it("folds the records into one snapshot when a chat ends with chats still queued", async () => {
    const { store } = sqliteJournal();
    const journal = await startedChat(store);
    journal.enqueue({ id: "m2", text: "next" });
    await toolStep(journal, 1);
    journal.endChat();
    await journal.flush();
    const records = await store.readRecords("bot", "s1");
    expect(records).toHaveLength(1);
    expect(JSON.parse(records[0]!.text)).toMatchObject({ snapshot: { chat: null, queued: [{ id: "m2" }] } });
    // The next chat's steps follow the snapshot.
    journal.take(["m2"]);
    journal.beginChat("c2", "next", 4);
    await journal.flush();
    expect(await store.load("bot", "s1")).toEqual({ chat: journal.unfinishedChat, queued: [] });
  });

  it("resumes a long chat from its records in order, folding them every 64 records", async () => {
    const { store } = sqliteJournal();
    const journal = await startedChat(store);
    for (let index = 1; index <= 100; index++) await toolStep(journal, index);
    expect((await store.readRecords("bot", "s1")).length).toBeLessThan(70);
    const resumed = await SessionJournal.open(store, "bot", "s1");
    expect(resumed.unfinishedChat).toEqual(journal.unfinishedChat);
    expect(resumed.unfinishedChat?.iteration).toBe(100);
    // The resumed journal goes on numbering after the last record.
    resumed.record({ role: "assistant", content: "the end" });
    await resumed.flush();
    expect((await store.load("bot", "s1"))?.chat).toEqual(resumed.unfinishedChat);
  });

  it("after a torn tail resumes what came before it and writes a snapshot next", async () => {
    const { store, database } = sqliteJournal();
    const journal = await startedChat(store);
    await toolStep(journal, 1);
    const beforeTear = structuredClone(journal.unfinishedChat);
    statement(database, "INSERT INTO chat_journal_records VALUES (?, ?, ?, ?)").run(
      "bot",
      "s1",
      4,
      '{"n":4,"id',
    );
    const resumed = await SessionJournal.open(store, "bot", "s1");
    expect(resumed.unfinishedChat).toEqual(beforeTear);
    await toolStep(resumed, 2);
    const records = await store.readRecords("bot", "s1");
    expect(JSON.parse(records[0]!.text)).toMatchObject({ n: 5, snapshot: { chat: { chatId: "c1" } } });
    expect((await store.load("bot", "s1"))?.chat).toEqual(resumed.unfinishedChat);
  });

  it("sends a failed record again, under the same id, before the next step's", async () => {
    const { store } = sqliteJournal();
    const sent: JournalRecord[] = [];
    let failures = 1;
    const flaky: ChatJournal = {
      load: (agent, session) => store.load(agent, session),
      readRecords: (agent, session) => store.readRecords(agent, session),
      compact: (agent, session, record) => store.compact(agent, session, record),
      remove: (agent, session) => store.remove(agent, session),
      list: () => store.list(),
      async append(agent, session, record) {
        sent.push(record);
        if (record.n === 2 && failures-- > 0) throw new Error("NATS is down");
        await store.append(agent, session, record);
      },
    };
    const journal = await startedChat(flaky);
    await toolStep(journal, 1);
    journal.record({ role: "assistant", content: "done" });
    await journal.flush();
    expect(sent.map((record) => record.n)).toEqual([1, 2, 2, 3, 4]);
    expect(sent[1]?.id).toBe(sent[2]?.id);
    expect((await store.load("bot", "s1"))?.chat).toEqual(journal.unfinishedChat);
  });

  it("sends a step's record without waiting for the one before it, and a tool waits for both", async () => {
    const { store } = sqliteJournal();
    const sent: number[] = [];
    const held: (() => void)[] = [];
    const slow: ChatJournal = {
      load: (agent, session) => store.load(agent, session),
      readRecords: (agent, session) => store.readRecords(agent, session),
      compact: (agent, session, record) => store.compact(agent, session, record),
      remove: (agent, session) => store.remove(agent, session),
      list: () => store.list(),
      async append(agent, session, record) {
        sent.push(record.n);
        await new Promise<void>((resolve) => held.push(resolve));
        await store.append(agent, session, record);
      },
    };
    const journal = await SessionJournal.open(slow, "bot", "s1");
    journal.beginChat("c1", "hi", 0);
    const first = journal.flush();
    await new Promise((resolve) => setImmediate(resolve));
    journal.record(assistantCalling("t1"));
    let isStarted = false;
    const started = journal.toolStarting("t1").then(() => {
      isStarted = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    // Record 2 went out while record 1 is unacknowledged; the tool is not started yet.
    expect(sent).toEqual([1, 2]);
    held[1]!();
    await new Promise((resolve) => setImmediate(resolve));
    expect(isStarted).toBe(false);
    held[0]!();
    await Promise.all([first, started]);
    expect((await store.load("bot", "s1"))?.chat).toEqual(journal.unfinishedChat);
  });
});
