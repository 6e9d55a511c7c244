import type { JournalEntry } from "./journal-entry.js";
import type { JournalRecord, StoredJournalRecord } from "./journal-record.js";

export type {
  AnsweredChat,
  ChatProgress,
  InFlightIteration,
  JournalEntry,
  QueuedChat,
} from "./journal-entry.js";

/** A session with a journal entry. */
export interface JournaledSession {
  agent: string;
  session: string;
}

/**
 * Where sessions' unfinished work is written, step by step, so another life of the host (or the
 * next owner of the session) can finish it. Append-only: each write is one numbered
 * {@link JournalRecord} holding the steps of one tick; a compaction writes the whole entry as one
 * snapshot record and drops the records before it; a session with nothing left unfinished has no
 * records at all. {@link SessionJournal} is the one writer of a session's records.
 */
export interface ChatJournal {
  /** The session's entry: its records folded (see `foldJournal`); undefined when none is stored. */
  load(agent: string, session: string): Promise<JournalEntry | undefined>;
  /** The session's records as stored, oldest first. */
  readRecords(agent: string, session: string): Promise<StoredJournalRecord[]>;
  /**
   * Stores one record after the session's last. A write whose acknowledgement was lost is
   * recognised by the record's `id` when retried, never stored twice.
   */
  append(agent: string, session: string, record: JournalRecord): Promise<void>;
  /** Stores `record` (a snapshot) and drops every record of the session before it. */
  compact(agent: string, session: string, record: JournalRecord): Promise<void>;
  /** Drops every record of the session. */
  remove(agent: string, session: string): Promise<void>;
  /** Every session that has records. */
  list(): Promise<JournaledSession[]>;
}
