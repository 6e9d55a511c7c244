import { describe, expect, it } from "vitest";
import { openAgentDatabase } from "../../src/context/agent-database.js";
import type { ChatJournal } from "../../src/journal/chat-journal.js";
import { RecordsReadAhead } from "../../src/journal/records-read-ahead.js";
import { SessionJournal } from "../../src/journal/session-journal.js";
import { SqliteChatJournal } from "../../src/journal/sqlite-chat-journal.js";
import { appendSteps } from "./journal-helpers.js";

/** A SQLite journal store, counting the reads of each session's records. */
function countingStore(): { store: ChatJournal; reads: () => number } {
  const sqlite = new SqliteChatJournal(openAgentDatabase(":memory:"));
  let reads = 0;
  const store: ChatJournal = {
    load: (agent, session) => sqlite.load(agent, session),
    readRecords: (agent, session) => {
      reads++;
      return sqlite.readRecords(agent, session);
    },
    append: (agent, session, record) => sqlite.append(agent, session, record),
    compact: (agent, session, record) => sqlite.compact(agent, session, record),
    remove: (agent, session) => sqlite.remove(agent, session),
    list: () => sqlite.list(),
  };
  return { store, reads: () => reads };
}

describe("RecordsReadAhead", () => {
  it("starts reading the session's records when made; the session's open takes that read", async () => {
    const { store, reads } = countingStore();
    await appendSteps(store, "bot", "s1", [{ kind: "approval", toolNames: ["shell"] }]);
    const before = reads();
    const ahead = new RecordsReadAhead(store, "bot", "s1");
    expect(reads() - before).toBe(1);
    const journal = await SessionJournal.open(ahead, "bot", "s1");
    expect(reads() - before).toBe(1);
    expect(journal.approvalRequired).toEqual(["shell"]);
  });

  it("reads again for a second read, another session, or after a write", async () => {
    const { store, reads } = countingStore();
    await appendSteps(store, "bot", "s1", [{ kind: "approval", toolNames: ["shell"] }]);
    const ahead = new RecordsReadAhead(store, "bot", "s1");
    const before = reads();
    expect(await ahead.readRecords("bot", "s2")).toEqual([]);
    expect(reads() - before).toBe(1);
    await ahead.append("bot", "s1", { n: 2, id: "r2", steps: [{ kind: "approval", toolNames: ["deploy"] }] });
    // The read made ahead no longer holds what is stored: the session's read goes to the store.
    expect((await ahead.readRecords("bot", "s1")).map((record) => record.n)).toEqual([1, 2]);
    expect(reads() - before).toBe(2);
    expect(await ahead.readRecords("bot", "s1")).toHaveLength(2);
    expect(reads() - before).toBe(3);
  });
});
