import type { ChatJournal, JournaledSession } from "./chat-journal.js";
import type { JournalEntry } from "./journal-entry.js";
import type { JournalRecord, StoredJournalRecord } from "./journal-record.js";

/**
 * A journal store whose records of one session are already being read: the read starts when this
 * is made, and the session's first {@link readRecords} takes it. A session is opened by reading its
 * history, then its journal, one after the other; a read started ahead runs during the history's,
 * so an open on JetStream waits for the longer of the two instead of both. Everything else is
 * the store's.
 */
export class RecordsReadAhead implements ChatJournal {
  readonly #store: ChatJournal;
  readonly #agent: string;
  readonly #session: string;
  /** The read started ahead, until it is taken. */
  #reading: Promise<StoredJournalRecord[]> | undefined;

  constructor(store: ChatJournal, agent: string, session: string) {
    this.#store = store;
    this.#agent = agent;
    this.#session = session;
    const reading = store.readRecords(agent, session);
    // Taken by the session's open; a session that fails to open before it leaves it unobserved.
    reading.catch(() => {});
    this.#reading = reading;
  }

  readRecords(agent: string, session: string): Promise<StoredJournalRecord[]> {
    const reading = this.#reading;
    if (reading !== undefined && agent === this.#agent && session === this.#session) {
      this.#reading = undefined;
      return reading;
    }
    return this.#store.readRecords(agent, session);
  }

  load(agent: string, session: string): Promise<JournalEntry | undefined> {
    return this.#store.load(agent, session);
  }

  append(agent: string, session: string, record: JournalRecord): Promise<void> {
    this.#reading = undefined;
    return this.#store.append(agent, session, record);
  }

  compact(agent: string, session: string, record: JournalRecord): Promise<void> {
    this.#reading = undefined;
    return this.#store.compact(agent, session, record);
  }

  remove(agent: string, session: string): Promise<void> {
    this.#reading = undefined;
    return this.#store.remove(agent, session);
  }

  list(): Promise<JournaledSession[]> {
    return this.#store.list();
  }
}
