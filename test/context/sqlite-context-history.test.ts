import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
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
import { conversation } from "./history-fixtures.js";

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

describe("SqliteContextHistory", () => {
  it("round-trips tool calls, thinking blocks and images through a real file", async () => {
    const writer = history();
    await writer.append(conversation.slice(0, 3));
    await writer.append(conversation.slice(3));
    expect(await writer.restore()).toEqual(conversation);
  });

  it("keeps the data when reopened", async () => {
    const first = new SqliteContextHistory({ path, agent: "bot", session: "s1" });
    await first.append(conversation);
    first.close();
    expect(await history().restore()).toEqual(conversation);
  });

  it("opens the file in WAL mode with the current schema version", () => {
    history();
    const database = track(pinDatabase(new Database(path, { readonly: true })));
    expect(statement(database, "PRAGMA journal_mode", { pluck: true }).get()).toBe("wal");
    expect(statement(database, "PRAGMA user_version", { pluck: true }).get()).toBe(HISTORY_SCHEMA_VERSION);
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

  it("replaces everything with the summary, then appends after it", async () => {
    const writer = history();
    await writer.append(conversation);
    await writer.replace([{ role: "user", content: "Summary of the conversation." }]);
    await writer.append([{ role: "user", content: "Next question" }]);
    expect(await writer.restore()).toEqual([
      { role: "user", content: "Summary of the conversation." },
      { role: "user", content: "Next question" },
    ]);
  });

  it("clears only its own session", async () => {
    const mine = history("bot", "s1");
    const other = history("bot", "s2");
    await mine.append(conversation);
    await other.append(conversation.slice(0, 1));
    await mine.clear();
    expect(await mine.restore()).toEqual([]);
    expect(await other.restore()).toEqual(conversation.slice(0, 1));
  });

  it("keys messages by agent and session", async () => {
    await history("bot", "s1").append([{ role: "user", content: "bot s1" }]);
    await history("bot", "s2").append([{ role: "user", content: "bot s2" }]);
    await history("helper", "s1").append([{ role: "user", content: "helper s1" }]);
    expect(await history("bot", "s1").restore()).toEqual([{ role: "user", content: "bot s1" }]);
    expect(await history("bot", "s2").restore()).toEqual([{ role: "user", content: "bot s2" }]);
    expect(await history("helper", "s1").restore()).toEqual([{ role: "user", content: "helper s1" }]);
    expect(await history("helper", "s2").restore()).toEqual([]);
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

  it("upgrades a version-1 file in place: every stored message kept, the seq mark table added (issue 9)", async () => {
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
    expect(HISTORY_SCHEMA_VERSION).toBe(4);
  });

  it("keeps a session's event seq mark: never lowered, kept by clear, seen after reopening (issue 9)", async () => {
    const writer = history();
    await writer.saveSeq(1_000);
    await writer.saveSeq(400);
    expect(await writer.loadSeq()).toBe(1_000);
    await writer.append(conversation);
    await writer.clear();
    expect(await writer.loadSeq()).toBe(1_000);
    expect(await history("bot", "s2").loadSeq()).toBe(0);
    writer.close();
    const reopened = new SqliteContextHistory({ path, agent: "bot", session: "s1" });
    expect(await reopened.loadSeq()).toBe(1_000);
    reopened.close();
  });

  it("keeps a pending tool approval across reopening, per session, taken once (issue 12)", async () => {
    const pending = {
      chatId: "chat-1",
      iteration: 1,
      calls: [{ toolCallId: "c1", toolName: "deploy", arguments: '{"env":"prod"}' }],
      snapshot: { value: { iterating: "toolTurn" }, context: { messages: conversation } },
    };
    const writer = history();
    expect(await writer.loadPendingApproval()).toBeUndefined();
    await writer.savePendingApproval(pending);
    expect(await history("bot", "s2").loadPendingApproval()).toBeUndefined();
    writer.close();
    const reopened = new SqliteContextHistory({ path, agent: "bot", session: "s1" });
    expect(await reopened.loadPendingApproval()).toEqual(pending);
    expect(await reopened.takePendingApproval()).toBe(true);
    expect(await reopened.takePendingApproval()).toBe(false);
    expect(await reopened.loadPendingApproval()).toBeUndefined();
    reopened.close();
  });

  it("creates the schema on a database handle it did not open", async () => {
    const database = track(pinDatabase(new Database(":memory:")));
    const memory = new SqliteContextHistory({ database, agent: "bot", session: "s1" });
    await memory.append(conversation);
    expect(await memory.restore()).toEqual(conversation);
  });
});
