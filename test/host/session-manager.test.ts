import { describe, expect, it, vi } from "vitest";
import { createAgent } from "../../src/agent/create-agent.js";
import { InMemoryContextHistory } from "../../src/context/in-memory-history.js";
import { SessionActor } from "../../src/host/session-actor.js";
import {
  SessionManager,
  SessionManagerClosedError,
  SessionManagerOverloadedError,
} from "../../src/host/session-manager.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import { textOf } from "../../src/llm/types.js";
import { ScriptedBackend } from "../../src/testing/index.js";
import { FakeAgent } from "./fake-agent.js";

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A manager over fake agents with a hand-driven clock; sweeps are run by the test. */
function setup(
  options: {
    idleTimeoutMs?: number;
    isManual?: boolean;
    maxSessions?: number;
    groupOf?: (agent: string, session: string) => number;
  } = {},
) {
  let now = 0;
  const agents: FakeAgent[] = [];
  const log: string[] = [];
  const createSession = vi.fn(async (agent: string, session: string) => {
    const fake = new FakeAgent({ name: agent, session, isManual: options.isManual ?? false });
    agents.push(fake);
    return new SessionActor({ agent: fake, now: () => now });
  });
  const manager = new SessionManager({
    createSession,
    idleTimeoutMs: options.idleTimeoutMs ?? 1_000,
    ...(options.maxSessions === undefined ? {} : { maxSessions: options.maxSessions }),
    ...(options.groupOf === undefined ? {} : { groupOf: options.groupOf }),
    now: () => now,
    log: (line) => log.push(line),
  });
  return {
    manager,
    agents,
    log,
    createSession,
    advance: (ms: number) => {
      now += ms;
    },
  };
}

describe("SessionManager", () => {
  it("builds a stopped session again only once its journal has stored what it was given (or the wait ran out)", async () => {
    const { manager, agents, createSession } = setup();
    await manager.get("bot", "s1");
    let stored = () => {};
    const flushed = new Promise<void>((resolve) => {
      stored = resolve;
    });
    // The session's journal still writes the end of its last chat.
    Object.defineProperty(agents[0]!, "journal", { value: { flush: () => flushed, take: () => {} } });
    const dropping = manager.drop("bot", "s1", "a test drops it");
    let isRebuilt = false;
    const again = manager.get("bot", "s1").then((actor) => {
      isRebuilt = true;
      return actor;
    });
    for (let turn = 0; turn < 5; turn++) await tick();
    expect(isRebuilt).toBe(false);
    expect(createSession).toHaveBeenCalledTimes(1);
    stored();
    await dropping;
    await again;
    expect(isRebuilt).toBe(true);
    expect(createSession).toHaveBeenCalledTimes(2);
  });

  it("creates a session on first use and shares one creation between concurrent first uses", async () => {
    const { manager, createSession } = setup();
    const [first, second] = await Promise.all([manager.get("bot", "s1"), manager.get("bot", "s1")]);
    expect(first).toBe(second);
    expect(createSession).toHaveBeenCalledTimes(1);
    expect(await manager.get("bot", "s1")).toBe(first);
    expect(await manager.get("bot", "s2")).not.toBe(first);
    expect(manager.size).toBe(2);
  });

  it("retries a failed creation on the next use", async () => {
    const { manager, createSession } = setup();
    createSession.mockRejectedValueOnce(new Error("database is locked"));
    const attempts = await Promise.allSettled([manager.get("bot", "s1"), manager.get("bot", "s1")]);
    expect(attempts.map((attempt) => attempt.status)).toEqual(["rejected", "rejected"]);
    expect(createSession).toHaveBeenCalledTimes(1);
    const actor = await manager.get("bot", "s1");
    expect(actor.isStopped).toBe(false);
    expect(createSession).toHaveBeenCalledTimes(2);
  });

  it("passivates an idle session: compacts it, stops it, and builds it again on the next use", async () => {
    const { manager, agents, createSession, advance } = setup();
    const actor = await manager.get("bot", "s1");
    await actor.chatAndWait("hello");
    advance(999);
    expect(await manager.sweep()).toBe(0);
    advance(1);
    expect(await manager.sweep()).toBe(1);
    expect(agents[0]?.compactCalls).toEqual([undefined]);
    expect(actor.isStopped).toBe(true);
    expect(manager.find("bot", "s1")).toBeUndefined();
    const again = await manager.get("bot", "s1");
    expect(again).not.toBe(actor);
    expect(createSession).toHaveBeenCalledTimes(2);
  });

  it("skips compaction of an empty session but still passivates it", async () => {
    const { manager, agents, advance } = setup();
    await manager.get("bot", "s1");
    advance(5_000);
    expect(await manager.sweep()).toBe(1);
    expect(agents[0]?.compactCalls).toEqual([]);
  });

  it("logs a failed passivation compaction and evicts anyway", async () => {
    const { manager, agents, log, advance } = setup();
    const actor = await manager.get("bot", "s1");
    await actor.chatAndWait("hello");
    agents[0]!.compactResult = new Error("the provider is down");
    advance(1_000);
    expect(await manager.sweep()).toBe(1);
    expect(actor.isStopped).toBe(true);
    expect(log).toEqual([
      "passivating bot/s1: compaction failed (the provider is down); stopping it anyway, its history is saved",
    ]);
  });

  it("keeps a session that received a message while it was being compacted", async () => {
    const { manager, agents, advance } = setup();
    const actor = await manager.get("bot", "s1");
    await actor.chatAndWait("hello");
    let releaseCompaction!: () => void;
    agents[0]!.onCompact = () =>
      new Promise<void>((resolve) => {
        releaseCompaction = resolve;
      });
    advance(1_000);
    const sweeping = manager.sweep();
    await tick();
    const late = manager.use("bot", "s1", (session) => session.chatAndWait("still there?"));
    releaseCompaction();
    expect(await sweeping).toBe(0);
    expect(await late).toMatchObject({ ok: true, result: "echo: still there?" });
    expect(actor.isStopped).toBe(false);
    expect(manager.find("bot", "s1")).toBe(actor);
  });

  it("does not passivate a busy session", async () => {
    const { manager, advance } = setup({ isManual: true });
    const actor = await manager.get("bot", "s1");
    void actor.chatAndWait("long");
    advance(10_000);
    expect(await manager.sweep()).toBe(0);
    expect(actor.isStopped).toBe(false);
  });

  it("neither passivates nor evicts for room an idle session whose chat awaits a tool approval", async () => {
    const { manager, agents, advance } = setup({ maxSessions: 1 });
    const actor = await manager.get("bot", "s1");
    await actor.chatAndWait("hello");
    agents[0]!.hasPendingApproval = true;
    advance(10_000);
    expect(await manager.sweep()).toBe(0);
    await expect(manager.get("bot", "s2")).rejects.toBeInstanceOf(SessionManagerOverloadedError);
    expect(actor.isStopped).toBe(false);
    agents[0]!.hasPendingApproval = false;
    expect(await manager.sweep()).toBe(1);
  });

  it("passivates on its own timer with a short idle timeout", async () => {
    const manager = new SessionManager({
      createSession: async (agent, session) =>
        new SessionActor({ agent: new FakeAgent({ name: agent, session }) }),
      idleTimeoutMs: 20,
      sweepIntervalMs: 5,
    });
    manager.start();
    const actor = await manager.get("bot", "s1");
    await vi.waitFor(() => expect(actor.isStopped).toBe(true), { timeout: 5_000, interval: 5 });
    expect(manager.size).toBe(0);
    await manager.close();
  });

  it("close lets running work finish within the grace period, then cancels the rest", async () => {
    const { manager, agents } = setup({ isManual: true });
    const quick = await manager.get("bot", "quick");
    const slow = await manager.get("bot", "slow");
    const quickAnswer = quick.chatAndWait("quick");
    const slowAnswer = slow.chatAndWait("slow");
    await tick();
    const closing = manager.close({ graceMs: 50 });
    agents[0]?.chats[0]?.resolve();
    expect(await quickAnswer).toMatchObject({ ok: true });
    await closing;
    expect(await slowAnswer).toEqual({
      ok: false,
      error: { code: "cancelled", message: "the host is shutting down" },
    });
    await expect(manager.get("bot", "other")).rejects.toBeInstanceOf(SessionManagerClosedError);
  });

  it("restores a passivated session's conversation from its history", async () => {
    const histories = new Map<string, InMemoryContextHistory>();
    const backend = new ScriptedBackend((request) => {
      const last = textOf(request.messages.at(-1)?.content ?? "");
      if (last.includes("My name is Ada.")) return { text: "Nice to meet you, Ada." };
      if (last.includes("What is my name?")) return { text: "Your name is Ada." };
      return { text: "Summary: the user's name is Ada." };
    });
    let now = 0;
    const manager = new SessionManager({
      createSession: async (agent, session) => {
        const key = `${agent}/${session}`;
        if (!histories.has(key)) histories.set(key, new InMemoryContextHistory());
        const created = await createAgent({
          name: agent,
          session,
          llm: new RetryingLlmClient({ backend }),
          model: "scripted",
          history: histories.get(key)!,
        });
        return new SessionActor({ agent: created, now: () => now });
      },
      idleTimeoutMs: 1_000,
      now: () => now,
    });
    const first = await manager.use("bot", "s1", (actor) => actor.chatAndWait("My name is Ada."));
    expect(first).toMatchObject({ ok: true, result: "Nice to meet you, Ada." });
    now += 1_000;
    expect(await manager.sweep()).toBe(1);
    expect(backend.requests).toHaveLength(2);
    await expect(histories.get("bot/s1")?.restore()).resolves.toHaveLength(1);
    const second = await manager.use("bot", "s1", (actor) => actor.chatAndWait("What is my name?"));
    expect(second).toMatchObject({ ok: true, result: "Your name is Ada." });
    const lastRequest = backend.requests.at(-1)!;
    // The restored context is the passivation summary (the history was replaced by it).
    expect(lastRequest.messages.map((message) => textOf(message.content)).join("\n")).toContain(
      "Summary: the user's name is Ada.",
    );
    await manager.close();
  });
});

describe("SessionManager's sessions by group", () => {
  /** The group is the session name's number modulo 3 (`s4` → 1). */
  const groupOf = (_agent: string, session: string) => Number(session.slice(1)) % 3;
  const sorted = (pairs: [string, string][]) => pairs.map(([agent, session]) => `${agent}/${session}`).sort();

  it("lists one group's live sessions, and follows them as they stop (dropped, passivated, closed)", async () => {
    const { manager, advance } = setup({ groupOf });
    for (const session of ["s1", "s2", "s4", "s7", "s3"]) await manager.get("bot", session);
    await manager.get("other", "s10");
    expect(sorted(manager.liveSessionsIn(1))).toEqual(["bot/s1", "bot/s4", "bot/s7", "other/s10"]);
    expect(sorted(manager.liveSessionsIn(2))).toEqual(["bot/s2"]);
    expect(manager.liveSessionsIn(5)).toEqual([]);

    await manager.drop("bot", "s4", "its lease was lost");
    expect(sorted(manager.liveSessionsIn(1))).toEqual(["bot/s1", "bot/s7", "other/s10"]);
    // Back on its next use, in its group again.
    await manager.get("bot", "s4");
    expect(sorted(manager.liveSessionsIn(1))).toEqual(["bot/s1", "bot/s4", "bot/s7", "other/s10"]);

    advance(5_000);
    await manager.get("bot", "s2");
    expect(await manager.sweep()).toBe(6);
    expect(manager.liveSessionsIn(1)).toEqual([]);
    expect(manager.liveSessionsIn(2)).toEqual([]);

    await manager.get("bot", "s5");
    await manager.close();
    expect(manager.liveSessionsIn(2)).toEqual([]);
  });

  it("lists none without a grouping", async () => {
    const { manager } = setup();
    await manager.get("bot", "s1");
    expect(manager.liveSessionsIn(0)).toEqual([]);
    expect([...manager.liveSessions()]).toEqual([["bot", "s1"]]);
  });
});

describe("SessionManager at its session cap", () => {
  it("makes room by passivating the least recently used idle session, compaction first", async () => {
    const { manager, agents, advance } = setup({ maxSessions: 2 });
    await manager.use("bot", "old", (actor) => actor.chatAndWait("first"));
    advance(10);
    await manager.use("bot", "recent", (actor) => actor.chatAndWait("second"));
    const old = manager.find("bot", "old")!;
    advance(10);
    expect(await manager.use("bot", "new", (actor) => actor.chatAndWait("third"))).toMatchObject({
      ok: true,
    });
    expect(agents[0]?.compactCalls).toEqual([undefined]);
    expect(old.isStopped).toBe(true);
    expect(manager.find("bot", "recent")).toBeDefined();
    expect(manager.size).toBe(2);
  });

  it("refuses a new session as overloaded when every live session is busy, and creates nothing", async () => {
    const { manager, createSession, log, advance } = setup({ maxSessions: 2, isManual: true });
    const busy = ["a", "b"].map((session) =>
      manager.use("bot", session, (actor) => actor.chatAndWait("work")),
    );
    await tick();
    const refused = await manager.use("bot", "c", (actor) => actor.chatAndWait("hi")).catch((error) => error);
    expect(refused).toBeInstanceOf(SessionManagerOverloadedError);
    expect((refused as Error).message).toBe(
      "the host is at its limit of 2 live sessions and none is idle; try again later",
    );
    expect(createSession).toHaveBeenCalledTimes(2);
    expect(manager.size).toBe(2);
    expect(log).toEqual([
      "refused a new session bot/c (rule: max-sessions): the host is at its limit of 2 live sessions and none is idle; try again later",
    ]);
    // A caller that keeps trying is logged once a minute, with how many were refused meanwhile.
    for (const session of ["d", "e"]) {
      await expect(manager.get("bot", session)).rejects.toBeInstanceOf(SessionManagerOverloadedError);
    }
    expect(log).toHaveLength(1);
    advance(60_000);
    await expect(manager.get("bot", "f")).rejects.toBeInstanceOf(SessionManagerOverloadedError);
    expect(log[1]).toBe(
      "refused a new session bot/f (rule: max-sessions): the host is at its limit of 2 live sessions and none is idle; try again later (2 more since the last line)",
    );
    // A session that is live already is still served.
    manager.find("bot", "a")?.stop();
    expect(await busy[0]).toMatchObject({ ok: false, error: { code: "cancelled" } });
  });

  it("never lets concurrent creations overshoot the cap", async () => {
    const { manager, agents, createSession } = setup({ maxSessions: 3, isManual: true });
    // Three idle sessions with a conversation each (so making room means a compaction).
    for (const session of ["i1", "i2", "i3"]) {
      const answer = manager.use("bot", session, (actor) => actor.chatAndWait("hello"));
      await tick();
      agents.at(-1)?.chats[0]?.resolve();
      await answer;
    }
    const actors = ["i1", "i2", "i3"].map((session) => manager.find("bot", session)!);
    const runningAtEachCreation: number[] = [];
    createSession.mockImplementation(async (agent: string, session: string) => {
      runningAtEachCreation.push(actors.filter((actor) => !actor.isStopped).length);
      const fake = new FakeAgent({ name: agent, session, isManual: true });
      agents.push(fake);
      const actor = new SessionActor({ agent: fake });
      actors.push(actor);
      return actor;
    });
    for (const fake of agents) {
      fake.onCompact = () => new Promise((resolve) => setTimeout(resolve, 5));
    }
    // Ten new sessions at once, each kept busy by its first chat.
    const outcomes = await Promise.allSettled(
      Array.from({ length: 10 }, (_, index) =>
        manager.use("bot", `n${index}`, (actor) => {
          void actor.chatAndWait("work");
          return actor.session;
        }),
      ),
    );
    const started = outcomes.filter((outcome) => outcome.status === "fulfilled");
    const refused = outcomes.flatMap((outcome) => (outcome.status === "rejected" ? [outcome.reason] : []));
    expect(started).toHaveLength(3);
    expect(refused).toHaveLength(7);
    for (const reason of refused) expect(reason).toBeInstanceOf(SessionManagerOverloadedError);
    expect(manager.size).toBe(3);
    // Each new session started only once the idle one it replaced had stopped.
    expect(runningAtEachCreation).toEqual([2, 2, 2]);
    expect(actors.filter((actor) => !actor.isStopped)).toHaveLength(3);
    expect(agents.slice(0, 3).map((fake) => fake.compactCalls)).toEqual([
      [undefined],
      [undefined],
      [undefined],
    ]);
    await manager.close();
  });
});
