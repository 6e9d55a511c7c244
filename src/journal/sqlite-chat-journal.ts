import type { AgentDatabase } from "../context/agent-database.js";
import { statement } from "../context/sqlite-statements.js";
import {
  type ChatJournal,
  type JournalEntry,
  type JournaledSession,
  parseJournalEntry,
} from "./chat-journal.js";

/** The journal in the agent database (`chat_journal`, schema v4), next to the histories. */
export class SqliteChatJournal implements ChatJournal {
  readonly #database: AgentDatabase;

  constructor(database: AgentDatabase) {
    this.#database = database;
  }

  async load(agent: string, session: string): Promise<JournalEntry | undefined> {
    const text = statement(this.#database, "SELECT entry FROM chat_journal WHERE agent = ? AND session = ?", {
      pluck: true,
    }).get(agent, session);
    return typeof text === "string" ? parseJournalEntry(text) : undefined;
  }

  async save(agent: string, session: string, entry: JournalEntry): Promise<void> {
    statement(
      this.#database,
      "INSERT INTO chat_journal (agent, session, entry) VALUES (?, ?, ?) " +
        "ON CONFLICT (agent, session) DO UPDATE SET entry = excluded.entry",
    ).run(agent, session, JSON.stringify(entry));
  }

  async remove(agent: string, session: string): Promise<void> {
    statement(this.#database, "DELETE FROM chat_journal WHERE agent = ? AND session = ?").run(agent, session);
  }

  async list(): Promise<JournaledSession[]> {
    const rows = statement(
      this.#database,
      "SELECT agent, session FROM chat_journal ORDER BY agent, session",
    ).all();
    return rows as JournaledSession[];
  }
}
