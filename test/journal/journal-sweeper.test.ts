import { describe, expect, it } from "vitest";
import type { ChatJournal } from "../../src/journal/chat-journal.js";
import { JournalSweeper, type SweepClock, type SweptSessions } from "../../src/journal/journal-sweeper.js";
import { ResumeCounts } from "../../src/journal/resume-counts.js";

/**
 * The sweeper paces its activations: after a failover it must not start thousands of sessions at
 * once. Time is a fake clock that moves only when the sweeper sleeps, so the bound is checked by
 * counting what was activated in each clock second, not by waiting.
 */

function fakeClock() {
  let now = 0;
  const sleeps: number[] = [];
  const clock: SweepClock = {
    now: () => now,
    sleep: async (ms) => {
      sleeps.push(ms);
      now += ms;
    },
  };
  return { clock, sleeps, now: () => now };
}

function journalOf(sessions: string[]): ChatJournal {
  const list = async () => sessions.map((session) => ({ agent: "assistant", session }));
  return { list } as unknown as ChatJournal;
}

/** Live sessions, each activation recorded with the fake clock's time. */
function liveSessions(clockNow: () => number, counts?: ResumeCounts) {
  const live = new Set<string>();
  const activatedAt: number[] = [];
  const sessions: SweptSessions = {
    find: (_agent, session) => (live.has(session) ? session : undefined),
    use: async <T>(agent: string, session: string, use: () => T) => {
      live.add(session);
      activatedAt.push(clockNow());
      counts?.record(agent, session);
      return use();
    },
  };
  return { sessions, live, activatedAt };
}

const names = (count: number) => Array.from({ length: count }, (_, index) => `s${index}`);

describe("JournalSweeper", () => {
  it("activates at most maxResumesPerSecond sessions in any clock second", async () => {
    const time = fakeClock();
    const host = liveSessions(time.now);
    const sweeper = new JournalSweeper({
      journal: journalOf(names(120)),
      sessions: host.sessions,
      agents: ["assistant"],
      maxResumesPerSecond: 50,
      clock: time.clock,
    });

    await expect(sweeper.sweep()).resolves.toBe(120);

    // 120 sessions at 50 per second: three batches, two waits of a whole second between them.
    expect(time.sleeps).toEqual([1000, 1000]);
    const perSecond = new Map<number, number>();
    for (const at of host.activatedAt)
      perSecond.set(Math.floor(at / 1000), (perSecond.get(Math.floor(at / 1000)) ?? 0) + 1);
    expect([...perSecond.values()]).toEqual([50, 50, 20]);
    sweeper.close();
  });

  it("does not wait when the sessions fit in one second's share", async () => {
    const time = fakeClock();
    const host = liveSessions(time.now);
    const sweeper = new JournalSweeper({
      journal: journalOf(names(50)),
      sessions: host.sessions,
      agents: ["assistant"],
      maxResumesPerSecond: 50,
      clock: time.clock,
    });
    await expect(sweeper.sweep()).resolves.toBe(50);
    expect(time.sleeps).toEqual([]);
    sweeper.close();
  });

  it("defaults to 50 sessions per second", async () => {
    const time = fakeClock();
    const host = liveSessions(time.now);
    const sweeper = new JournalSweeper({
      journal: journalOf(names(101)),
      sessions: host.sessions,
      agents: ["assistant"],
      clock: time.clock,
    });
    await expect(sweeper.sweep()).resolves.toBe(101);
    expect(time.sleeps).toHaveLength(2);
    sweeper.close();
  });

  it("counts its own resumes apart from those of sessions a client touched first", async () => {
    const time = fakeClock();
    const counts = new ResumeCounts();
    const host = liveSessions(time.now, counts);
    // A client's chat reaches s0 before the sweep: the session resumes on first touch.
    await host.sessions.use("assistant", "s0", () => undefined);
    const lines: string[] = [];
    const sweeper = new JournalSweeper({
      journal: journalOf(names(3)),
      sessions: host.sessions,
      agents: ["assistant"],
      counts,
      clock: time.clock,
      log: (line) => lines.push(line),
    });
    await expect(sweeper.sweep()).resolves.toBe(2);
    expect(counts.snapshot()).toEqual({ onFirstTouch: 1, bySweeper: 2 });
    expect(lines).toEqual([
      "resumed 2 sessions from their journals (at most 50/s); so far resumed on first touch 1, by the sweeper 2",
    ]);
    sweeper.close();
  });

  it("skips a session a client touched while the sweep waited for its next second", async () => {
    const time = fakeClock();
    const counts = new ResumeCounts();
    const host = liveSessions(time.now, counts);
    // The client reaches s2 during the sweeper's wait after the first two.
    time.clock.sleep = async (ms) => {
      time.sleeps.push(ms);
      await host.sessions.use("assistant", "s2", () => undefined);
    };
    const sweeper = new JournalSweeper({
      journal: journalOf(names(4)),
      sessions: host.sessions,
      agents: ["assistant"],
      maxResumesPerSecond: 2,
      counts,
      clock: time.clock,
    });
    await expect(sweeper.sweep()).resolves.toBe(3);
    expect(counts.snapshot()).toEqual({ onFirstTouch: 1, bySweeper: 3 });
    sweeper.close();
  });

  it("stops mid-sweep once closed, without activating the rest", async () => {
    const time = fakeClock();
    const host = liveSessions(time.now);
    const sweeper: JournalSweeper = new JournalSweeper({
      journal: journalOf(names(10)),
      sessions: host.sessions,
      agents: ["assistant"],
      maxResumesPerSecond: 3,
      clock: {
        now: time.clock.now,
        sleep: async (): Promise<void> => sweeper.close(),
      },
    });
    await expect(sweeper.sweep()).resolves.toBe(3);
    expect(host.live.size).toBe(3);
  });

  it("refuses a rate that is not a positive whole number", () => {
    const options = {
      journal: journalOf([]),
      sessions: liveSessions(() => 0).sessions,
      agents: ["assistant"],
    };
    expect(() => new JournalSweeper({ ...options, maxResumesPerSecond: 0 })).toThrow(
      "maxResumesPerSecond must be a positive whole number, got 0",
    );
    expect(() => new JournalSweeper({ ...options, maxResumesPerSecond: 2.5 })).toThrow(RangeError);
  });
});
