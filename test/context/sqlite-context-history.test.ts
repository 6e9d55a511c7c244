import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Worker } from "node:worker_threads";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  type AgentDatabase,
  HISTORY_SCHEMA_VERSION,
  listSessions,
  openAgentDatabase,
} from "../../src/context/agent-database.js";
import { CorruptHistoryError, HistorySchemaVersionError } from "../../src/context/history-errors.js";
import { SqliteContextHistory } from "../../src/context/sqlite-context-history.js";
import { pinDatabase, statement } from "../../src/context/sqlite-statements.js";
import type { Message } from "../../src/llm/types.js";
import { describeHistoryContract } from "./history-contract.js";
import { conversation } from "./history-fixtures.js";

const require = createRequire(import.meta.url);

let directory: string;
let path: string;
const opened: Array<{ close(): void }> = [];

/** Tracks what a test opens so every handle is closed before the folder is removed. */
function track<T extends { close(): void }>(handle: T): T {
  opened.push(handle);
  return handle;
}

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), "agentloop-history-"));
  path = join(directory, "nested", "agents.db");
});

afterEach(() => {
  for (const handle of opened.splice(0)) handle.close();
  rmSync(directory, { recursive: true, force: true });
});

const history = (agent = "bot", session = "s1") => track(new SqliteContextHistory({ path, agent, session }));

describeHistoryContract("SqliteContextHistory", async () => {
  const folder = mkdtempSync(join(tmpdir(), "agentloop-history-contract-"));
  const file = join(folder, "agents.db");
  const handles: SqliteContextHistory[] = [];
  return {
    open(agent, session) {
      const opened = new SqliteContextHistory({ path: file, agent, session });
      handles.push(opened);
      return opened;
    },
    async plant(agent, session, message) {
      const database = openAgentDatabase(file);
      const next = statement(
        database,
        "SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE agent = ? AND session = ?",
        { pluck: true },
      ).get(agent, session);
      statement(database, "INSERT INTO messages (agent, session, position, message) VALUES (?, ?, ?, ?)").run(
        agent,
        session,
        next,
        JSON.stringify(message),
      );
      database.close();
    },
    maxPayloadBytes: 1024 * 1024,
    async cleanup() {
      for (const handle of handles.splice(0)) handle.close();
      rmSync(folder, { recursive: true, force: true });
    },
  };
});

describe("SqliteContextHistory", () => {
  it("opens the file in WAL mode with the current schema version", () => {
    history();
    const database = track(pinDatabase(new Database(path, { readonly: true })));
    expect(statement(database, "PRAGMA journal_mode", { pluck: true }).get()).toBe("wal");
    expect(statement(database, "PRAGMA user_version", { pluck: true }).get()).toBe(HISTORY_SCHEMA_VERSION);
  });

  it("waits for WAL mode while another process holds the write lock of a new file, instead of failing at once", async () => {
    // Regression: two hosts opening one new file at once; one failed with "database is locked"
    // because SQLite does not wait for the lock the switch to WAL needs.
    mkdirSync(dirname(path), { recursive: true });
    // The other process, as a worker thread: it holds the write lock of the (rollback-mode) file
    // for a moment, then commits.
    const worker = new Worker(
      `const Database = require(${JSON.stringify(require.resolve("better-sqlite3"))});
       const { parentPort, workerData } = require("node:worker_threads");
       const database = new Database(workerData);
       database.exec("CREATE TABLE other (x)");
       database.exec("BEGIN IMMEDIATE");
       database.exec("INSERT INTO other VALUES (1)");
       parentPort.postMessage("locked");
       setTimeout(() => { database.exec("COMMIT"); database.close(); }, 200);`,
      { eval: true, workerData: path },
    );
    const exited = new Promise((resolve) => worker.once("exit", resolve));
    await new Promise((resolve) => worker.once("message", resolve));
    const database = track(openAgentDatabase(path));
    expect(statement(database, "PRAGMA journal_mode", { pluck: true }).get()).toBe("wal");
    expect(statement(database, "SELECT x FROM other", { pluck: true }).all()).toEqual([1]);
    await exited;
  });

  it("still fails with SQLite's busy error when the lock is not released in time", async () => {
    mkdirSync(dirname(path), { recursive: true });
    // Pinned like every handle: once garbage, Node 24 aborts the process that finalises it (the
    // test worker, which goes on to run other files).
    const holder = track(pinDatabase(new Database(path)));
    holder.exec("CREATE TABLE other (x)");
    holder.exec("BEGIN IMMEDIATE");
    expect(() => openAgentDatabase(path, { busyTimeoutMs: 50 })).toThrow(
      expect.objectContaining({ code: "SQLITE_BUSY" }),
    );
    holder.exec("ROLLBACK");
  });

  it("never stores system messages", async () => {
    const writer = history();
    await writer.append([{ role: "system", content: "You are a bot." }, ...conversation]);
    await writer.replace([
      { role: "system", content: "You are a bot." },
      { role: "user", content: "Summary." },
    ]);
    expect(await writer.restore()).toEqual([{ role: "user", content: "Summary." }]);
    const database = track(pinDatabase(new Database(path, { readonly: true })));
    const roles = statement(database, "SELECT message FROM messages")
      .pluck()
      .all()
      .map((json) => (JSON.parse(json as string) as Message).role);
    expect(roles).toEqual(["user"]);
  });

  it("sees appends made through another connection to the same file", async () => {
    const first = history();
    const second = history();
    await first.append([{ role: "user", content: "one" }]);
    await second.append([{ role: "assistant", content: "two" }]);
    await first.append([{ role: "user", content: "three" }]);
    const expected = [
      { role: "user", content: "one" },
      { role: "assistant", content: "two" },
      { role: "user", content: "three" },
    ];
    expect(await first.restore()).toEqual(expected);
    expect(await second.restore()).toEqual(expected);
  });

  it("lets sessions share one database handle and lists them", async () => {
    const database: AgentDatabase = track(openAgentDatabase(path));
    const one = new SqliteContextHistory({ database, agent: "bot", session: "alpha" });
    const two = new SqliteContextHistory({ database, agent: "bot", session: "beta" });
    await one.append(conversation);
    await two.append(conversation.slice(0, 2));
    await new SqliteContextHistory({ database, agent: "other", session: "gamma" }).append(conversation);
    one.close(); // a shared handle stays open
    expect(await two.restore()).toEqual(conversation.slice(0, 2));
    expect(listSessions(database, "bot")).toEqual([
      { session: "alpha", messageCount: conversation.length },
      { session: "beta", messageCount: 2 },
    ]);
    expect(listSessions(database, "nobody")).toEqual([]);
  });

  it("fails with a clear error on a row that is not JSON", async () => {
    const writer = history();
    await writer.append(conversation.slice(0, 2));
    const database = track(pinDatabase(new Database(path)));
    statement(database, "UPDATE messages SET message = '{not json' WHERE position = 1").run();
    const error = await writer.restore().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptHistoryError);
    expect((error as CorruptHistoryError).position).toBe(1);
    expect((error as Error).message).toBe(
      'corrupt history row (agent "bot", session "s1", position 1): the message is not valid JSON',
    );
  });

  it("fails with a clear error on a row that is not a message, rather than dropping it", async () => {
    const writer = history();
    await writer.append(conversation.slice(0, 1));
    const database = track(pinDatabase(new Database(path)));
    statement(
      database,
      "INSERT INTO messages (agent, session, position, message) VALUES ('bot', 's1', 1, ?)",
    ).run(JSON.stringify({ role: "robot", content: 42 }));
    const error = await writer.restore().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CorruptHistoryError);
    expect((error as Error).message).toMatch(
      /^corrupt history row \(agent "bot", session "s1", position 1\): not a valid message: role: .+; content: /,
    );
  });

  it("refuses a database written with a newer schema", () => {
    history().close();
    const database = pinDatabase(new Database(path));
    database.exec(`PRAGMA user_version = ${HISTORY_SCHEMA_VERSION + 1}`);
    database.close();
    expect(() => new SqliteContextHistory({ path, agent: "bot", session: "s1" })).toThrow(
      HistorySchemaVersionError,
    );
  });

  it("upgrades a version-1 file in place: every stored message kept, the seq mark table added", async () => {
    // A file as the version-1 code wrote it.
    mkdirSync(dirname(path), { recursive: true });
    const old = pinDatabase(new Database(path));
    old.exec(
      "CREATE TABLE messages (agent TEXT NOT NULL, session TEXT NOT NULL, position INTEGER NOT NULL, message TEXT NOT NULL, PRIMARY KEY (agent, session, position)) WITHOUT ROWID",
    );
    const insert = statement(old, "INSERT INTO messages VALUES (?, ?, ?, ?)");
    for (const [position, message] of conversation.entries()) {
      insert.run("bot", "s1", position, JSON.stringify(message));
    }
    old.exec("PRAGMA user_version = 1");
    old.close();

    const upgraded = history();
    expect(await upgraded.restore()).toEqual(conversation);
    expect(await upgraded.loadSeq()).toBe(0);
    const database = track(pinDatabase(new Database(path, { readonly: true })));
    expect(statement(database, "PRAGMA user_version", { pluck: true }).get()).toBe(HISTORY_SCHEMA_VERSION);
    expect(HISTORY_SCHEMA_VERSION).toBe(5);
  });

  it("creates the schema on a database handle it did not open", async () => {
    const database = track(pinDatabase(new Database(":memory:")));
    const memory = new SqliteContextHistory({ database, agent: "bot", session: "s1" });
    await memory.append(conversation);
    expect(await memory.restore()).toEqual(conversation);
  });
});
