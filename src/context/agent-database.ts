import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import Database from "better-sqlite3";
import { z } from "zod";
import { HistorySchemaVersionError } from "./history-errors.js";
import { pinDatabase, statement } from "./sqlite-statements.js";

/** The SQLite handle histories share: one per database file and process. */
export type AgentDatabase = Database.Database;

/**
 * Schema steps: entry `i` takes the database from version `i` to `i + 1`. The version lives in
 * `PRAGMA user_version`. Append a step to change the schema; never edit a shipped one.
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE IF NOT EXISTS messages (
     agent    TEXT    NOT NULL,
     session  TEXT    NOT NULL,
     position INTEGER NOT NULL,
     message  TEXT    NOT NULL, -- one Message as JSON
     PRIMARY KEY (agent, session, position)
   ) WITHOUT ROWID`,
  // 1 → 2: each session's event seq mark, so seq stays monotonic when a session is rebuilt.
  `CREATE TABLE IF NOT EXISTS event_seqs (
     agent   TEXT    NOT NULL,
     session TEXT    NOT NULL,
     seq     INTEGER NOT NULL, -- the highest event seq the session may have used
     PRIMARY KEY (agent, session)
   ) WITHOUT ROWID`,
  // 2 → 3: a chat waiting for a tool approval, so it survives passivation and a restart.
  `CREATE TABLE IF NOT EXISTS pending_approvals (
     agent   TEXT NOT NULL,
     session TEXT NOT NULL,
     pending TEXT NOT NULL, -- one PendingApproval as JSON
     PRIMARY KEY (agent, session)
   ) WITHOUT ROWID`,
  // 3 → 4: each session's unfinished work (the running chat's progress, the queued chats).
  `CREATE TABLE IF NOT EXISTS chat_journal (
     agent   TEXT NOT NULL,
     session TEXT NOT NULL,
     entry   TEXT NOT NULL, -- one JournalEntry as JSON
     PRIMARY KEY (agent, session)
   ) WITHOUT ROWID`,
  // 4 → 5: the journal appends a record per step instead of rewriting the entry; each entry
  // stored by version 4 becomes its session's first record, a snapshot.
  `CREATE TABLE IF NOT EXISTS chat_journal_records (
     agent   TEXT    NOT NULL,
     session TEXT    NOT NULL,
     n       INTEGER NOT NULL, -- 1, 2, … in the order written
     record  TEXT    NOT NULL, -- one JournalRecord as JSON
     PRIMARY KEY (agent, session, n)
   ) WITHOUT ROWID;
   INSERT INTO chat_journal_records (agent, session, n, record)
     SELECT agent, session, 1,
            json_object('n', 1, 'id', 'v4-' || agent || '.' || session, 'snapshot', json(entry), 'steps', json('[]'))
       FROM chat_journal WHERE json_valid(entry);
   DROP TABLE chat_journal;`,
];

/** The schema version this code reads and writes. */
export const HISTORY_SCHEMA_VERSION = MIGRATIONS.length;

export interface OpenAgentDatabaseOptions {
  /** How long a write waits for another connection's lock before failing (default 5,000 ms). */
  busyTimeoutMs?: number;
}

/**
 * Opens (creating the file and its folder if needed) the SQLite database that holds agents'
 * histories, in WAL mode so several connections and processes read while one writes, and brings
 * its schema up to date. Share the handle between the sessions of a process; close it when done.
 */
export function openAgentDatabase(path: string, options: OpenAgentDatabaseOptions = {}): AgentDatabase {
  const busyTimeoutMs = options.busyTimeoutMs ?? 5_000;
  if (path !== ":memory:" && !path.startsWith("file:"))
    mkdirSync(dirname(resolve(path)), { recursive: true });
  const database = pinDatabase(new Database(path, { timeout: busyTimeoutMs }));
  try {
    database.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.trunc(busyTimeoutMs))}`);
    if (!database.memory) enableWal(database, busyTimeoutMs);
    // Safe with WAL (a crash may lose the last commits, never corrupt the file) and much faster.
    database.exec("PRAGMA synchronous = NORMAL");
    migrateAgentDatabase(database);
  } catch (error) {
    database.close();
    throw error;
  }
  return database;
}

/** Pause between tries of {@link enableWal}. */
const WAL_RETRY_MS = 10;

/**
 * Switches the file to WAL mode (a no-op once it is). The switch needs the write lock, and SQLite
 * does not wait for it here (the statement already reads, and a reader waiting for a writer could
 * deadlock): while another process migrates a new file at the same moment it fails at once with
 * SQLITE_BUSY. So it is tried again until `busyTimeoutMs` has passed, as any other write would wait.
 * Opening is synchronous, so the pause between tries blocks too.
 */
function enableWal(database: AgentDatabase, busyTimeoutMs: number): void {
  const deadline = Date.now() + busyTimeoutMs;
  for (;;) {
    try {
      database.exec("PRAGMA journal_mode = WAL");
      return;
    } catch (error) {
      if (!isBusy(error) || Date.now() >= deadline) throw error;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, WAL_RETRY_MS);
    }
  }
}

/** True for SQLite's "another connection holds the lock" (better-sqlite3 puts SQLite's code on `code`). */
function isBusy(error: unknown): boolean {
  return error instanceof Database.SqliteError && error.code === "SQLITE_BUSY";
}

/**
 * Creates or upgrades the schema. Idempotent and safe when several processes open a new file at
 * once: the check is repeated inside an immediate (write-locked) transaction.
 */
export function migrateAgentDatabase(database: AgentDatabase): void {
  if (schemaVersion(database) === HISTORY_SCHEMA_VERSION) return;
  database
    .transaction(() => {
      const found = schemaVersion(database);
      if (found > HISTORY_SCHEMA_VERSION) {
        throw new HistorySchemaVersionError(found, HISTORY_SCHEMA_VERSION, database.name);
      }
      for (const step of MIGRATIONS.slice(found)) database.exec(step);
      database.exec(`PRAGMA user_version = ${HISTORY_SCHEMA_VERSION}`);
    })
    .immediate();
}

const SessionRow = z.object({ session: z.string(), messageCount: z.number().int() });
export type SessionSummary = z.infer<typeof SessionRow>;

/** The sessions of `agent` that have stored messages, by name. */
export function listSessions(database: AgentDatabase, agent: string): SessionSummary[] {
  const rows = statement(
    database,
    "SELECT session, COUNT(*) AS messageCount FROM messages WHERE agent = ? GROUP BY session ORDER BY session",
  ).all(agent);
  return z.array(SessionRow).parse(rows);
}

/** Whether `agent`'s session `session` has any stored message. */
export function hasStoredSession(database: AgentDatabase, agent: string, session: string): boolean {
  return (
    statement(database, "SELECT 1 FROM messages WHERE agent = ? AND session = ? LIMIT 1").get(
      agent,
      session,
    ) !== undefined
  );
}

function schemaVersion(database: AgentDatabase): number {
  return z
    .number()
    .int()
    .parse(statement(database, "PRAGMA user_version", { pluck: true }).get());
}
