import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
import { decodeKeyToken, encodeKeyToken, KvChatJournal } from "../../src/journal/kv-chat-journal.js";
import { SqliteChatJournal } from "../../src/journal/sqlite-chat-journal.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

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

/** The one suite both journals pass. */
function registerJournalContract(name: string, open: () => Promise<ChatJournal>): void {
  describe(`${name} (ChatJournal contract)`, () => {
    it("stores, replaces and removes a session's entry", async () => {
      const journal = await open();
      expect(await journal.load("bot", "s1")).toBeUndefined();
      await journal.save("bot", "s1", entry);
      expect(await journal.load("bot", "s1")).toEqual(entry);
      const next: JournalEntry = { chat: null, queued: [{ id: "m3", text: "later" }] };
      await journal.save("bot", "s1", next);
      expect(await journal.load("bot", "s1")).toEqual(next);
      await journal.remove("bot", "s1");
      expect(await journal.load("bot", "s1")).toBeUndefined();
      // Removing what is not there is no error.
      await journal.remove("bot", "s1");
    });

    it("lists every session with an entry, and none removed", async () => {
      const journal = await open();
      await journal.save("bot", "b", entry);
      await journal.save("bot", "a.b c", entry);
      await journal.save("other", "s", entry);
      await journal.save("bot", "gone", entry);
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
      await Promise.all(sessions.map((session) => journal.save("busy", session, entry)));
      let writing = true;
      const writes = (async () => {
        while (writing) await Promise.all(sessions.map((session) => journal.save("busy", session, entry)));
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

    it("keeps sessions apart", async () => {
      const journal = await open();
      await journal.save("bot", "s1", entry);
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
  return new SqliteChatJournal(database);
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

registerJournalContract("KvChatJournal", () =>
  KvChatJournal.open(connection, { bucket: `JOURNAL_TEST_${process.pid}_${++bucketNumber}` }),
);

describe("the journal's storage", () => {
  it("upgrades a schema v3 database to v4 keeping its histories and pending approvals", async () => {
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
    expect(HISTORY_SCHEMA_VERSION).toBe(4);
    const history = new SqliteContextHistory({ database, agent: "bot", session: "s1" });
    expect(await history.restore()).toEqual([{ role: "user", content: "kept" }]);
    expect(statement(database, "SELECT COUNT(*) FROM pending_approvals", { pluck: true }).get()).toBe(1);
    const journal = new SqliteChatJournal(database);
    await journal.save("bot", "s1", entry);
    expect(await journal.load("bot", "s1")).toEqual(entry);
  });

  it("escapes names into KV key tokens and back", () => {
    for (const name of ["plain", "a.b", "with space", "ünï=cødé", "x*y>z"]) {
      const token = encodeKeyToken(name);
      expect(token).toMatch(/^[A-Za-z0-9_=-]+$/);
      expect(decodeKeyToken(token)).toBe(name);
    }
  });

  it("reads an unreadable stored entry as none", async () => {
    const database = openAgentDatabase(join(directory, "torn.db"));
    databases.push(database);
    statement(database, "INSERT INTO chat_journal VALUES (?, ?, ?)").run("bot", "s1", "{not json");
    expect(await new SqliteChatJournal(database).load("bot", "s1")).toBeUndefined();
  });
});
