import type { AgentDatabase } from "../context/agent-database.js";
import { statement } from "../context/sqlite-statements.js";
import type { ChatJournal, JournaledSession } from "./chat-journal.js";
import { JournalConflictError } from "./journal-conflict-error.js";
import type { JournalEntry } from "./journal-entry.js";
import { foldJournal, type JournalRecord, type StoredJournalRecord } from "./journal-record.js";

/**
 * The journal in the agent database (`chat_journal_records`, schema v5), next to the histories:
 * one row per record. A record is one `INSERT`; better-sqlite3 runs it at once, so the caller
 * ({@link SessionJournal}) batches a tick's steps into one record, off the chat's path.
 */
export class SqliteChatJournal implements ChatJournal {
  readonly #database: AgentDatabase;

  constructor(database: AgentDatabase) {
    this.#database = database;
  }

  async load(agent: string, session: string): Promise<JournalEntry | undefined> {
    return foldJournal(await this.readRecords(agent, session)).entry;
  }

  async readRecords(agent: string, session: string): Promise<StoredJournalRecord[]> {
    return statement(
      this.#database,
      "SELECT n, record AS text FROM chat_journal_records WHERE agent = ? AND session = ? ORDER BY n",
    ).all(agent, session) as StoredJournalRecord[];
  }

  async append(agent: string, session: string, record: JournalRecord): Promise<void> {
    this.#insert(agent, session, record);
  }

  async compact(agent: string, session: string, record: JournalRecord): Promise<void> {
    this.#database.transaction(() => {
      this.#insert(agent, session, record);
      statement(
        this.#database,
        "DELETE FROM chat_journal_records WHERE agent = ? AND session = ? AND n < ?",
      ).run(agent, session, record.n);
    })();
  }

  /** Inserts the record; one already there under its number is fine only when it is this one (a retry). */
  #insert(agent: string, session: string, record: JournalRecord): void {
    const { changes } = statement(
      this.#database,
      "INSERT INTO chat_journal_records (agent, session, n, record) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
    ).run(agent, session, record.n, JSON.stringify(record));
    if (changes === 1) return;
    const storedId = statement(
      this.#database,
      "SELECT json_extract(record, '$.id') FROM chat_journal_records WHERE agent = ? AND session = ? AND n = ?",
      { pluck: true },
    ).get(agent, session, record.n);
    if (storedId !== record.id) {
      throw new JournalConflictError(
        `journal record ${record.n} of ${agent}/${session} was written by another writer`,
      );
    }
  }

  async remove(agent: string, session: string): Promise<void> {
    statement(this.#database, "DELETE FROM chat_journal_records WHERE agent = ? AND session = ?").run(
      agent,
      session,
    );
  }

  async list(): Promise<JournaledSession[]> {
    const rows = statement(
      this.#database,
      "SELECT DISTINCT agent, session FROM chat_journal_records ORDER BY agent, session",
    ).all();
    return rows as JournaledSession[];
  }
}
