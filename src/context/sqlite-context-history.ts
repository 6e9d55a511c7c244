import type Database from "better-sqlite3";
import { z } from "zod";
import type { Message } from "../llm/types.js";
import { type AgentDatabase, migrateAgentDatabase, openAgentDatabase } from "./agent-database.js";
import type { ContextHistory } from "./context-history.js";
import { CorruptHistoryError } from "./history-errors.js";
import { PendingApproval } from "./pending-approval.js";
import { statement } from "./sqlite-statements.js";
import { parseStoredMessage, storableMessages } from "./stored-message.js";

export type SqliteContextHistoryParams = {
  agent: string;
  session: string;
} & (
  | {
      /** A database file of its own, opened now and closed by {@link SqliteContextHistory.close}. */ path: string;
    }
  | {
      /** A handle from {@link openAgentDatabase}, shared with other sessions; the caller closes it. */ database: AgentDatabase;
    }
);

const StoredRow = z.object({ position: z.number().int(), message: z.string() });
const NextPosition = z.number().int();
const StoredSeq = z.number().int().nonnegative();

/**
 * A session's history in SQLite, keyed by agent + session: one row per message, the
 * message as JSON. Every write is one transaction; every `restore()` reads the file, so another
 * connection's or process's appends are seen. Rows are validated on the way back: a corrupt row
 * is a {@link CorruptHistoryError}, never silently skipped. System messages are never stored.
 */
export class SqliteContextHistory implements ContextHistory {
  readonly agent: string;
  readonly session: string;
  readonly #database: AgentDatabase;
  readonly #ownsDatabase: boolean;
  readonly #select: Statement;
  readonly #nextPosition: Statement;
  readonly #insert: Statement;
  readonly #delete: Statement;
  readonly #selectSeq: Statement;
  readonly #upsertSeq: Statement;
  readonly #selectPending: Statement;
  readonly #upsertPending: Statement;
  readonly #deletePending: Statement;
  readonly #appendRows: (messages: readonly Message[]) => void;
  readonly #replaceRows: (messages: readonly Message[]) => void;

  constructor(params: SqliteContextHistoryParams) {
    if (params.agent === "" || params.session === "") {
      throw new TypeError("SqliteContextHistory needs a non-empty agent and session");
    }
    this.agent = params.agent;
    this.session = params.session;
    if ("path" in params) {
      this.#database = openAgentDatabase(params.path);
      this.#ownsDatabase = true;
    } else {
      migrateAgentDatabase(params.database);
      this.#database = params.database;
      this.#ownsDatabase = false;
    }
    const database = this.#database;
    this.#select = statement(
      database,
      "SELECT position, message FROM messages WHERE agent = ? AND session = ? ORDER BY position",
    );
    this.#nextPosition = statement(
      database,
      "SELECT COALESCE(MAX(position) + 1, 0) FROM messages WHERE agent = ? AND session = ?",
      { pluck: true },
    );
    this.#insert = statement(
      database,
      "INSERT INTO messages (agent, session, position, message) VALUES (?, ?, ?, ?)",
    );
    this.#delete = statement(database, "DELETE FROM messages WHERE agent = ? AND session = ?");
    this.#selectSeq = statement(database, "SELECT seq FROM event_seqs WHERE agent = ? AND session = ?", {
      pluck: true,
    });
    // Never lowers the mark: another writer (process) may have moved it further.
    this.#upsertSeq = statement(
      database,
      `INSERT INTO event_seqs (agent, session, seq) VALUES (?, ?, ?)
       ON CONFLICT (agent, session) DO UPDATE SET seq = MAX(seq, excluded.seq)`,
    );

    this.#selectPending = statement(
      database,
      "SELECT pending FROM pending_approvals WHERE agent = ? AND session = ?",
      { pluck: true },
    );
    this.#upsertPending = statement(
      database,
      `INSERT INTO pending_approvals (agent, session, pending) VALUES (?, ?, ?)
       ON CONFLICT (agent, session) DO UPDATE SET pending = excluded.pending`,
    );
    this.#deletePending = statement(
      database,
      "DELETE FROM pending_approvals WHERE agent = ? AND session = ?",
    );

    const insertFrom = (start: number, messages: readonly Message[]) => {
      messages.forEach((message, index) => {
        this.#insert.run(this.agent, this.session, start + index, JSON.stringify(message));
      });
    };
    // Immediate transactions take the write lock before reading the next position, so two
    // writers can't pick the same one (and WAL readers never block them).
    const append = database.transaction((messages: readonly Message[]) => {
      const next = NextPosition.parse(this.#nextPosition.get(this.agent, this.session));
      insertFrom(next, messages);
    });
    const replace = database.transaction((messages: readonly Message[]) => {
      this.#delete.run(this.agent, this.session);
      insertFrom(0, messages);
    });
    this.#appendRows = (messages) => append.immediate(messages);
    this.#replaceRows = (messages) => replace.immediate(messages);
  }

  async restore(): Promise<Message[]> {
    const rows = this.#select.all(this.agent, this.session);
    return rows.map((row) => this.#parseRow(row));
  }

  async append(messages: readonly Message[]): Promise<void> {
    const stored = storableMessages(messages);
    if (stored.length > 0) this.#appendRows(stored);
  }

  async replace(messages: readonly Message[]): Promise<void> {
    this.#replaceRows(storableMessages(messages));
  }

  /** `/new` clears the conversation, not the seq mark: seq stays monotonic across resets. */
  async clear(): Promise<void> {
    this.#delete.run(this.agent, this.session);
    this.#deletePending.run(this.agent, this.session);
  }

  async loadSeq(): Promise<number> {
    const stored = this.#selectSeq.get(this.agent, this.session);
    if (stored === undefined) return 0;
    const seq = StoredSeq.safeParse(stored);
    if (!seq.success) {
      throw new CorruptHistoryError(
        this.#where(-1),
        `the stored event seq is not a count: ${String(stored)}`,
      );
    }
    return seq.data;
  }

  async saveSeq(seq: number): Promise<void> {
    this.#upsertSeq.run(this.agent, this.session, seq);
  }

  async loadPendingApproval(): Promise<PendingApproval | undefined> {
    const stored = this.#selectPending.get(this.agent, this.session);
    if (stored === undefined) return undefined;
    let json: unknown;
    try {
      json = JSON.parse(String(stored));
    } catch (error) {
      throw new CorruptHistoryError(this.#where(-1), "the pending approval is not valid JSON", error);
    }
    const pending = PendingApproval.safeParse(json);
    if (!pending.success) {
      throw new CorruptHistoryError(
        this.#where(-1),
        `not a valid pending approval: ${z.prettifyError(pending.error)}`,
        pending.error,
      );
    }
    return pending.data;
  }

  async savePendingApproval(pending: PendingApproval): Promise<void> {
    this.#upsertPending.run(this.agent, this.session, JSON.stringify(pending));
  }

  /** One DELETE: of two takers (two processes) only one sees a row go. */
  async takePendingApproval(): Promise<boolean> {
    return this.#deletePending.run(this.agent, this.session).changes > 0;
  }

  /** Closes the database when this history opened it (`path`); a shared handle stays open. */
  close(): void {
    if (this.#ownsDatabase && this.#database.open) this.#database.close();
  }

  #parseRow(row: unknown): Message {
    const stored = StoredRow.safeParse(row);
    if (!stored.success) {
      throw new CorruptHistoryError(
        this.#where(-1),
        `unexpected row shape: ${z.prettifyError(stored.error)}`,
      );
    }
    const where = this.#where(stored.data.position);
    let json: unknown;
    try {
      json = JSON.parse(stored.data.message);
    } catch (error) {
      throw new CorruptHistoryError(where, "the message is not valid JSON", error);
    }
    return parseStoredMessage(json, where);
  }

  #where(position: number) {
    return { agent: this.agent, session: this.session, position };
  }
}

type Statement = Database.Statement<unknown[], unknown>;
