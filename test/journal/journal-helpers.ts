import type { ChatJournal, JournalEntry } from "../../src/journal/chat-journal.js";
import type { JournalStep } from "../../src/journal/journal-record.js";

let nextId = 0;

/** Stores `entry` as the session's one record (a snapshot after whatever is there), as a compaction does. */
export async function storeEntry(journal: ChatJournal, agent: string, session: string, entry: JournalEntry) {
  const records = await journal.readRecords(agent, session);
  const n = Math.max(0, ...records.map((record) => record.n)) + 1;
  await journal.compact(agent, session, { n, id: `test-${++nextId}`, snapshot: entry, steps: [] });
}

/** Appends one record of `steps` after the session's last. */
export async function appendSteps(
  journal: ChatJournal,
  agent: string,
  session: string,
  steps: JournalStep[],
) {
  const records = await journal.readRecords(agent, session);
  const n = Math.max(0, ...records.map((record) => record.n)) + 1;
  await journal.append(agent, session, { n, id: `test-${++nextId}`, steps });
  return n;
}
