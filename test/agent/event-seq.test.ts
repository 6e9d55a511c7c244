import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { ContextHistory } from "../../src/context/context-history.js";
import { InMemoryContextHistory } from "../../src/context/in-memory-history.js";
import { SEQ_RESERVATION_BLOCK } from "../../src/events/event-emitter.js";
import { createTempHistories, createTestAgent } from "../support/agent-harness.js";

/**
 * Regression: `seq` restarted at 1 whenever a session was rebuilt (after a
 * passivation or a host restart), so two events of one session could carry the same seq. It is
 * monotonic per session now: each rebuilt agent numbers its events above every one the session's
 * earlier instances published, its history keeping the mark.
 */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

/** Runs one chat on a fresh agent over `history` and returns the seqs of its events. */
async function seqsOfOneChat(history: ContextHistory, text: string): Promise<number[]> {
  const { agent, events } = await createTestAgent({ script: [{ deltas: ["a", "b", "c"] }], history });
  await agent.chat(text);
  return events.map((event) => event.seq);
}

describe.each([
  ["in memory (passivation within one process)", () => new InMemoryContextHistory()],
  ["in SQLite (a restart with --db)", () => histories.open()],
])("event seq, history %s", (_name, open) => {
  it("goes on increasing when the session is rebuilt, reset included", async () => {
    const history = open();
    const first = await seqsOfOneChat(history, "one");
    expect(first[0]).toBe(1);
    // Strictly increasing within an instance.
    expect(first).toEqual([...first].sort((a, b) => a - b));
    expect(new Set(first).size).toBe(first.length);

    const second = await seqsOfOneChat(history, "two");
    expect(second[0]).toBeGreaterThan(first.at(-1)!);

    await history.clear();
    const third = await seqsOfOneChat(history, "three");
    expect(third[0]).toBeGreaterThan(second.at(-1)!);
  });

  it("stores the mark before the events it covers, so a crash cannot reuse a seq", async () => {
    const history = open();
    const { agent, events } = await createTestAgent({
      script: [{ deltas: Array.from({ length: SEQ_RESERVATION_BLOCK + 10 }, () => "x") }],
      history,
    });
    await agent.chat("a long answer");
    // No orderly shutdown: whatever the last instance emitted is below the stored mark.
    expect(await history.loadSeq?.()).toBeGreaterThanOrEqual(events.at(-1)!.seq);
  });
});
