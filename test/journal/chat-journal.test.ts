import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AgentDatabase,
  HISTORY_SCHEMA_VERSION,
  openAgentDatabase,
} from "../../src/context/agent-database.js";
import { SqliteContextHistory } from "../../src/context/sqlite-context-history.js";
import { pinDatabase, statement } from "../../src/context/sqlite-statements.js";
import type { ChatJournal, JournalEntry } from "../../src/journal/chat-journal.js";
import { JournalConflictError } from "../../src/journal/journal-conflict-error.js";
import type { JournalStep } from "../../src/journal/journal-record.js";
import { decodeKeyToken, encodeKeyToken, KvChatJournal } from "../../src/journal/kv-chat-journal.js";
import { SqliteChatJournal } from "../../src/journal/sqlite-chat-journal.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { appendSteps, storeEntry } from "./journal-helpers.js";

const entry: JournalEntry = {
  chat: {
    chatId: "c1",
    userText: "hi",
    chatStart: 2,
    iteration: 1,
    messages: [{ role: "user", content: "hi" }],
    inFlight: {
      assistant: {
        role: "assistant",
        content: "",
        toolCalls: [{ id: "t1", name: "shell", arguments: '{"command":"ls"}' }],
      },
      started: ["t1"],
      results: {},
      appended: [],
    },
  },
  queued: [{ id: "m2", text: "next", type: "user" }],
};

/** A tool step of a chat as the session journal records it: the assistant turn, its call's start, its result. */
function toolStep(index: number): JournalStep[] {
  const callId = `t${index}`;
  return [
    {
      kind: "message",
      message: {
        role: "assistant",
        content: "",
        toolCalls: [{ id: callId, name: "shell", arguments: "{}" }],
      },
    },
    { kind: "started", callId },
    { kind: "message", message: { role: "tool", toolCallId: callId, content: `result ${index}` } },
  ];
}

const begin: JournalStep = {
  kind: "chat",
  chat: { chatId: "c1", userText: "hi", chatStart: 0, iteration: 0, messages: [], inFlight: null },
};

/**
 * The one suite both journals pass. `writeRaw` stores text as record `n` of a session bypassing
 * the journal (a torn write).
 */
function registerJournalContract(
  name: string,
  open: () => Promise<
    ChatJournal & { writeRaw(agent: string, session: string, n: number, text: string): Promise<void> }
  >,
): void {
  describe(`${name} (ChatJournal contract)`, () => {
    it("appends one record per step and reads a long chat back in order", async () => {
      const journal = await open();
      await appendSteps(journal, "bot", "long", [
        begin,
        { kind: "message", message: { role: "user", content: "hi" } },
      ]);
      for (let index = 1; index <= 120; index++) await appendSteps(journal, "bot", "long", toolStep(index));
      expect(await journal.readRecords("bot", "long")).toHaveLength(121);
      const loaded = await journal.load("bot", "long");
      expect(loaded?.chat?.iteration).toBe(120);
      // Iteration 120 is still in flight; the 119 before it are settled, each turn then its result.
      expect(loaded?.chat?.messages).toHaveLength(1 + 2 * 119);
      expect(loaded?.chat?.messages.at(-1)).toEqual({
        role: "tool",
        toolCallId: "t119",
        content: "result 119",
      });
      expect(loaded?.chat?.inFlight).toMatchObject({
        started: ["t120"],
        results: { t120: { content: "result 120" } },
      });
    });

    it("stops at a torn tail: an unreadable or missing record and what follows it count as not written", async () => {
      const journal = await open();
      await appendSteps(journal, "bot", "torn", [begin]);
      await appendSteps(journal, "bot", "torn", toolStep(1));
      const expected = await journal.load("bot", "torn");
      await journal.writeRaw("bot", "torn", 3, '{"n":3,"id":"x","steps":[{"kind":"mess');
      expect(await journal.load("bot", "torn")).toEqual(expected);
      // Record 5 without 4: a gap, as when the host died with record 4 unacknowledged.
      await journal.writeRaw("bot", "gap", 1, JSON.stringify({ n: 1, id: "a", steps: [begin] }));
      await journal.writeRaw("bot", "gap", 2, JSON.stringify({ n: 2, id: "b", steps: toolStep(1) }));
      await journal.writeRaw("bot", "gap", 5, JSON.stringify({ n: 5, id: "c", steps: toolStep(2) }));
      expect(await journal.load("bot", "gap")).toEqual(expected);
      // A snapshot after the tear starts over from what it holds.
      await journal.compact("bot", "torn", { n: 4, id: "s", snapshot: entry, steps: [] });
      expect(await journal.load("bot", "torn")).toEqual(entry);
    });

    it("compacts: the snapshot is the only record left and later steps follow it", async () => {
      const journal = await open();
      await appendSteps(journal, "bot", "c", [begin]);
      for (let index = 1; index <= 5; index++) await appendSteps(journal, "bot", "c", toolStep(index));
      const before = await journal.load("bot", "c");
      await journal.compact("bot", "c", { n: 7, id: "snap", snapshot: before!, steps: [] });
      expect((await journal.readRecords("bot", "c")).map((record) => record.n)).toEqual([7]);
      expect(await journal.load("bot", "c")).toEqual(before);
      await appendSteps(journal, "bot", "c", [{ kind: "end" }]);
      expect(await journal.load("bot", "c")).toEqual({ chat: null, queued: [] });
      await journal.remove("bot", "c");
      expect(await journal.readRecords("bot", "c")).toEqual([]);
      expect(await journal.list()).not.toContainEqual({ agent: "bot", session: "c" });
    });

    it("stores a retried record once, and refuses another writer's record under the same number", async () => {
      const journal = await open();
      const record = { n: 1, id: "r1", steps: [begin] };
      await journal.append("bot", "retry", record);
      await journal.append("bot", "retry", record);
      expect(await journal.readRecords("bot", "retry")).toHaveLength(1);
      await expect(journal.append("bot", "retry", { ...record, id: "other" })).rejects.toBeInstanceOf(
        JournalConflictError,
      );
    });

    it("stores, replaces and removes a session's entry", async () => {
      const journal = await open();
      expect(await journal.load("bot", "s1")).toBeUndefined();
      await storeEntry(journal, "bot", "s1", entry);
      expect(await journal.load("bot", "s1")).toEqual(entry);
      const next: JournalEntry = { chat: null, queued: [{ id: "m3", text: "later" }] };
      await storeEntry(journal, "bot", "s1", next);
      expect(await journal.load("bot", "s1")).toEqual(next);
      await journal.remove("bot", "s1");
      expect(await journal.load("bot", "s1")).toBeUndefined();
      // Removing what is not there is no error.
      await journal.remove("bot", "s1");
    });

    it("lists every session with an entry, and none removed", async () => {
      const journal = await open();
      await storeEntry(journal, "bot", "b", entry);
      await storeEntry(journal, "bot", "a.b c", entry);
      await storeEntry(journal, "other", "s", entry);
      await storeEntry(journal, "bot", "gone", entry);
      await journal.remove("bot", "gone");
      expect(await journal.list()).toEqual([
        { agent: "bot", session: "a.b c" },
        { agent: "bot", session: "b" },
        { agent: "other", session: "s" },
      ]);
      expect(await journal.load("bot", "a.b c")).toEqual(entry);
      expect(await journal.load("bot", "b")).toEqual(entry);
    });

    it("lists each session once while entries are rewritten under it", async () => {
      const journal = await open();
      const sessions = Array.from({ length: 30 }, (_, index) => `s${String(index).padStart(2, "0")}`);
      await Promise.all(sessions.map((session) => storeEntry(journal, "busy", session, entry)));
      let writing = true;
      const writes = (async () => {
        while (writing)
          await Promise.all(sessions.map((session) => storeEntry(journal, "busy", session, entry)));
      })();
      try {
        for (let round = 0; round < 10; round++) {
          expect((await journal.list()).filter((listed) => listed.agent === "busy")).toEqual(
            sessions.map((session) => ({ agent: "busy", session })),
          );
        }
      } finally {
        writing = false;
        await writes;
      }
    });

    it("reads back journals of every length while another session writes between their records", async () => {
      const journal = await open();
      await appendSteps(journal, "bot", "s1", [begin]);
      await appendSteps(journal, "bot", "s10", [begin]);
      for (let index = 1; index <= 12; index++) {
        await appendSteps(journal, "bot", "s1", toolStep(index));
        await appendSteps(journal, "bot", "s10", toolStep(index));
        const records = await journal.readRecords("bot", "s1");
        expect(records.map((record) => record.n)).toEqual(Array.from({ length: index + 1 }, (_, n) => n + 1));
        expect((await journal.load("bot", "s1"))?.chat?.iteration).toBe(index);
      }
      expect(await journal.readRecords("bot", "s2")).toEqual([]);
    });

    it("keeps sessions apart", async () => {
      const journal = await open();
      await storeEntry(journal, "bot", "s1", entry);
      expect(await journal.load("bot", "s2")).toBeUndefined();
      expect(await journal.load("bot2", "s1")).toBeUndefined();
    });
  });
}

let directory: string;
const databases: AgentDatabase[] = [];
beforeAll(() => {
  directory = mkdtempSync(join(tmpdir(), "agentloop-journal-"));
});
afterAll(() => {
  for (const database of databases) database.close();
  rmSync(directory, { recursive: true, force: true });
});

let fileNumber = 0;
registerJournalContract("SqliteChatJournal", async () => {
  const database = openAgentDatabase(join(directory, `j${++fileNumber}.db`));
  databases.push(database);
  return Object.assign(new SqliteChatJournal(database), {
    async writeRaw(agent: string, session: string, n: number, text: string) {
      statement(database, "INSERT INTO chat_journal_records VALUES (?, ?, ?, ?)").run(
        agent,
        session,
        n,
        text,
      );
    },
  });
});

let server: NatsServer;
let connection: NatsConnection;
let bucketNumber = 0;
beforeAll(async () => {
  server = await workerNatsServer();
  connection = await connect({ servers: server.url });
});
afterAll(async () => {
  await connection?.close();
  await server?.stop();
});

registerJournalContract("KvChatJournal", async () => {
  const bucket = `JOURNAL_TEST_${process.pid}_${++bucketNumber}`;
  const kv = await new Kvm(connection).create(bucket, { history: 1 });
  return Object.assign(await KvChatJournal.open(connection, { bucket }), {
    async writeRaw(agent: string, session: string, n: number, text: string) {
      await kv.put(`${encodeKeyToken(agent)}.${encodeKeyToken(session)}.${n}`, text);
    },
  });
});

describe("the journal's storage", () => {
  it("upgrades a schema v3 database to v5 keeping its histories and pending approvals", async () => {
    const path = join(directory, "old.db");
    const old = pinDatabase(new Database(path));
    old.exec(
      "CREATE TABLE messages (agent TEXT NOT NULL, session TEXT NOT NULL, position INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (agent, session, position)) WITHOUT ROWID",
    );
    old.exec(
      "CREATE TABLE event_seqs (agent TEXT NOT NULL, session TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (agent, session)) WITHOUT ROWID",
    );
    old.exec(
      "CREATE TABLE pending_approvals (agent TEXT NOT NULL, session TEXT NOT NULL, pending TEXT NOT NULL, PRIMARY KEY (agent, session)) WITHOUT ROWID",
    );
    statement(old, "INSERT INTO messages VALUES (?, ?, ?, ?)").run(
      "bot",
      "s1",
      0,
      JSON.stringify({ role: "user", content: "kept" }),
    );
    statement(old, "INSERT INTO pending_approvals VALUES (?, ?, ?)").run("bot", "s1", "{}");
    old.exec("PRAGMA user_version = 3");
    old.close();

    const database = openAgentDatabase(path);
    databases.push(database);
    expect(statement(database, "PRAGMA user_version", { pluck: true }).get()).toBe(HISTORY_SCHEMA_VERSION);
    expect(HISTORY_SCHEMA_VERSION).toBe(5);
    const history = new SqliteContextHistory({ database, agent: "bot", session: "s1" });
    expect(await history.restore()).toEqual([{ role: "user", content: "kept" }]);
    expect(statement(database, "SELECT COUNT(*) FROM pending_approvals", { pluck: true }).get()).toBe(1);
    const journal = new SqliteChatJournal(database);
    await storeEntry(journal, "bot", "s1", entry);
    expect(await journal.load("bot", "s1")).toEqual(entry);
  });

  it("reads a version-4 KV entry as a snapshot, goes on after it and purges it with the records", async () => {
    const bucket = `JOURNAL_TEST_${process.pid}_${++bucketNumber}`;
    const kv = await new Kvm(connection).create(bucket, { history: 1 });
    await kv.put("bot.s1", JSON.stringify(entry));
    await kv.put("bot.gone", JSON.stringify(entry));
    await kv.purge("bot.gone");
    const journal = await KvChatJournal.open(connection, { bucket });
    expect(await journal.list()).toEqual([{ agent: "bot", session: "s1" }]);
    expect(await journal.load("bot", "s1")).toEqual(entry);
    await appendSteps(journal, "bot", "s1", [{ kind: "take", ids: ["m2"] }]);
    expect(await journal.load("bot", "s1")).toEqual({ ...entry, queued: [] });
    await journal.remove("bot", "s1");
    expect(await journal.list()).toEqual([]);
    expect(await kv.get("bot.s1")).toBeNull();
  });

  it("escapes names into KV key tokens and back", () => {
    for (const name of ["plain", "a.b", "with space", "ünï=cødé", "x*y>z"]) {
      const token = encodeKeyToken(name);
      expect(token).toMatch(/^[A-Za-z0-9_=-]+$/);
      expect(decodeKeyToken(token)).toBe(name);
    }
  });

  it("reads an unreadable first record as no entry", async () => {
    const database = openAgentDatabase(join(directory, "torn.db"));
    databases.push(database);
    statement(database, "INSERT INTO chat_journal_records VALUES (?, ?, ?, ?)").run(
      "bot",
      "s1",
      1,
      "{not json",
    );
    expect(await new SqliteChatJournal(database).load("bot", "s1")).toBeUndefined();
  });
});
