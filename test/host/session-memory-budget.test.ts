import { describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { sessionStartError } from "../../src/host/agent-host.js";
import { SessionActor } from "../../src/host/session-actor.js";
import { HostMemoryOverloadedError, SessionManager } from "../../src/host/session-manager.js";
import { textOf } from "../../src/llm/types.js";
import { FakeAgent } from "./fake-agent.js";
import { startHostFixture } from "./host-fixture.js";

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

async function eventually(check: () => void): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      check();
      return;
    } catch (error) {
      if (attempt >= 200) throw error;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

/** A manager over fake sessions with a byte budget; each agent's size is set by the test. */
function budgetedManager(maxMemoryBytes: number) {
  let clock = 0;
  const agents = new Map<string, FakeAgent>();
  const manager = new SessionManager({
    maxMemoryBytes,
    now: () => clock,
    createSession: async (agent, session) => {
      const fake = new FakeAgent({ name: agent, session, isManual: true });
      agents.set(session, fake);
      return new SessionActor({ agent: fake, now: () => clock });
    },
  });
  /** Runs one chat on `session` to its end; the agent then holds `bytes` more. */
  const chat = async (session: string, bytes: number) => {
    clock++;
    const outcome = manager.use("bot", session, (actor) => actor.chatAndWait("hi"), { isChat: true });
    await eventually(() => expect(agents.get(session)?.chats.length ?? 0).toBeGreaterThan(0));
    const fake = agents.get(session) as FakeAgent;
    fake.bytesPerChat = bytes;
    fake.chats.at(-1)?.resolve();
    return outcome;
  };
  return { manager, agents, chat };
}

describe("SessionManager: memory bounded by bytes", () => {
  it("over the budget, passivates the least recently used idle session until back under it", async () => {
    const { manager, chat } = budgetedManager(1_000);
    expect(await chat("s1", 400)).toMatchObject({ ok: true });
    expect(await chat("s2", 400)).toMatchObject({ ok: true });
    await eventually(() => expect(manager.memoryBytes).toBe(800));
    expect(await chat("s3", 400)).toMatchObject({ ok: true });
    await eventually(() => expect(manager.find("bot", "s1")).toBeUndefined());
    expect(manager.find("bot", "s2")).toBeDefined();
    expect(manager.find("bot", "s3")).toBeDefined();
    expect(manager.memoryBytes).toBe(800);
    await manager.close();
  });

  it("never passivates a busy session; with nothing idle left, a chat is refused as overloaded (retryable)", async () => {
    const { manager, agents, chat } = budgetedManager(1_000);
    const session = await manager.get("bot", "s1");
    const s1 = agents.get("s1") as FakeAgent;
    s1.memoryBytes = 1_200;
    // Busy: its chat runs; the mailbox reports the session's size as it starts it.
    const busy = manager.use("bot", "s1", (actor) => actor.chatAndWait("long"), { isChat: true });
    await eventually(() => expect(manager.memoryBytes).toBe(1_200));
    await tick();
    expect(manager.find("bot", "s1")).toBe(session);
    expect(session.isIdle).toBe(false);

    const refused = manager.use("bot", "s2", (actor) => actor.chatAndWait("hi"), { isChat: true });
    const error = await refused.catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(HostMemoryOverloadedError);
    expect(error).toMatchObject({ code: "overloaded", retryable: true });
    expect(sessionStartError(error)).toMatchObject({ code: "overloaded" });
    expect(manager.find("bot", "s2")).toBeUndefined();
    expect(manager.find("bot", "s1")).toBe(session);

    // Once s1 is idle, the next chat passivates it and gets in.
    s1.chats[0]?.resolve();
    expect(await busy).toMatchObject({ ok: true });
    expect(await chat("s2", 10)).toMatchObject({ ok: true });
    expect(manager.find("bot", "s1")).toBeUndefined();
    expect(manager.memoryBytes).toBe(10);
    await manager.close();
  });
});

describe("AgentHost: memory bounded by bytes", () => {
  it("a session passivated for memory comes back with its history at its next chat", async () => {
    const bus = new LocalBus();
    const fixture = await startHostFixture(bus, { host: { maxMemoryBytes: 6_000 } });
    try {
      const long = (word: string) => `${word} ${"x".repeat(1_000)}`;
      expect(await fixture.request("bot", "chat", { session: "s1", text: long("first") })).toMatchObject({
        ok: true,
      });
      expect(await fixture.request("bot", "chat", { session: "s2", text: long("second") })).toMatchObject({
        ok: true,
      });
      // Each session holds two messages of ~1,000 characters (~4 KB): two are over the budget.
      await eventually(() => expect(fixture.host.sessions.find("bot", "s1")).toBeUndefined());
      expect(fixture.host.sessions.find("bot", "s2")).toBeDefined();
      expect(fixture.host.sessions.memoryBytes).toBeLessThanOrEqual(6_000);

      expect(await fixture.request("bot", "chat", { session: "s1", text: "again" })).toMatchObject({
        ok: true,
        result: "echo: again",
      });
      const request = fixture.backends.get("bot")?.requests.at(-1);
      const texts = request?.messages.map((message) => textOf(message.content)) ?? [];
      expect(texts).toContain(long("first"));
      expect(texts).toContain(`echo: ${long("first")}`);
    } finally {
      await fixture.close();
      await bus.close();
    }
  });
});
