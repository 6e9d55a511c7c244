import { describe, expect, it } from "vitest";
import { createActor, fromCallback } from "xstate";
import { sessionMachine } from "../../machines/session.machine.js";
import type { ChatOptions } from "../../src/agent/agent-types.js";
import { ChatFailedError } from "../../src/agent/chat-errors.js";
import type { EventBody } from "../../src/events/types.js";
import { SessionActor } from "../../src/host/session-actor.js";
import { emptyUsage } from "../../src/llm/types.js";
import { FakeAgent } from "./fake-agent.js";

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("SessionActor", () => {
  it("answers chats one at a time, in order", async () => {
    const agent = new FakeAgent({ isManual: true });
    const actor = new SessionActor({ agent });
    const answers = ["a", "b", "c"].map((text) => actor.chatAndWait(text));
    await tick();
    expect(agent.chats.map((chat) => chat.text)).toEqual(["a"]);
    agent.chats[0]?.resolve();
    await tick();
    expect(agent.chats.map((chat) => chat.text)).toEqual(["a", "b"]);
    agent.chats[1]?.resolve();
    await tick();
    agent.chats[2]?.resolve();
    const outcomes = await Promise.all(answers);
    expect(outcomes.map((outcome) => (outcome.ok ? outcome.result : outcome.error.code))).toEqual([
      "echo: a",
      "echo: b",
      "echo: c",
    ]);
    expect(outcomes[0]).toEqual({
      ok: true,
      result: "echo: a",
      usage: { prompt: 3, completion: 2, total: 5, cached: 0 },
    });
    expect(agent.overlapped).toBe(false);
    expect(actor.isIdle).toBe(true);
  });

  it("passes the nesting depth to the agent", async () => {
    const agent = new FakeAgent();
    const actor = new SessionActor({ agent });
    await actor.chat({ text: "deep", depth: 2 });
    expect(agent.chats[0]?.depth).toBe(2);
  });

  it("stop cancels the running chat and the queue; the next chat waits until the cancelled one let go", async () => {
    const agent = new FakeAgent({ isManual: true, cancelsAtOnce: false });
    const actor = new SessionActor({ agent });
    const running = actor.chatAndWait("long");
    const queued = actor.chatAndWait("queued");
    await tick();
    const first = agent.chats[0]!;
    expect(actor.stop()).toEqual({ ok: true });
    expect(first.signal?.aborted).toBe(true);
    expect(await running).toEqual({ ok: false, error: { code: "cancelled", message: "cancelled by stop" } });
    expect(await queued).toMatchObject({ ok: false, error: { code: "cancelled" } });
    const after = actor.chatAndWait("after");
    await tick();
    // The cancelled chat is still winding down (writing history): the next one must wait.
    expect(agent.chats.map((chat) => chat.text)).toEqual(["long"]);
    first.reject(new Error("cancelled"));
    await first.settled;
    await tick();
    expect(agent.chats.map((chat) => chat.text)).toEqual(["long", "after"]);
    agent.chats[1]?.resolve();
    expect(await after).toMatchObject({ ok: true, result: "echo: after" });
    expect(agent.overlapped).toBe(false);
  });

  it("shutdown resolves only once the stopped chat has let go (its history written)", async () => {
    const agent = new FakeAgent({ isManual: true, cancelsAtOnce: false });
    const actor = new SessionActor({ agent });
    const running = actor.chatAndWait("long");
    await tick();
    let isShutDown = false;
    const shutdown = actor.shutdown().then(() => {
      isShutDown = true;
    });
    expect(await running).toMatchObject({ ok: false, error: { code: "cancelled" } });
    expect(agent.chats[0]?.signal?.aborted).toBe(true);
    await tick();
    expect(isShutDown).toBe(false);
    expect(await actor.chatAndWait("late")).toMatchObject({ ok: false, error: { code: "cancelled" } });
    agent.chats[0]?.reject(new Error("cancelled"));
    await shutdown;
    expect(actor.isStopped).toBe(true);
    expect(agent.chats.map((chat) => chat.text)).toEqual(["long"]);
  });

  it("a compaction stopped mid-way settles before the next message runs", async () => {
    const agent = new FakeAgent();
    let release!: () => void;
    agent.onCompact = () =>
      new Promise<void>((resolve) => {
        release = resolve;
      });
    const actor = new SessionActor({ agent });
    const compaction = actor.compact("plans");
    await tick();
    actor.stop();
    expect(await compaction).toMatchObject({ ok: false, error: { code: "cancelled" } });
    const after = actor.chatAndWait("after");
    await tick();
    expect(agent.chats).toEqual([]);
    release();
    expect(await after).toMatchObject({ ok: true, result: "echo: after" });
    expect(agent.overlapped).toBe(false);
  });

  it("reports every chat it took that never ran: dropped from the queue, or stopped while waiting its turn", async () => {
    const agent = new FakeAgent({ isManual: true, cancelsAtOnce: false });
    const actor = new SessionActor({ agent, maxQueue: 1 });
    const running = actor.chatAndWait("long");
    const overflowed = actor.chatAndWait("overflowed");
    const queued = actor.chatAndWait("queued");
    expect(await overflowed).toMatchObject({ ok: false, error: { code: "queue_overflow" } });
    await tick();
    actor.stop();
    expect(await running).toMatchObject({ ok: false, error: { code: "cancelled" } });
    expect(await queued).toMatchObject({ ok: false, error: { code: "cancelled" } });
    // The running chat reports its own end (the agent's loop emits ChatFailed).
    expect(agent.cancelledChats).toEqual([
      { text: "overflowed", reason: "dropped: more than 1 messages were queued for the session" },
      { text: "queued", reason: "cancelled by stop" },
    ]);
    // "waiting" stays queued until "long" let go; it is stopped before that.
    const waiting = actor.chatAndWait("waiting");
    await tick();
    actor.stop();
    expect(await waiting).toMatchObject({ ok: false, error: { code: "cancelled" } });
    agent.chats[0]?.reject(new Error("cancelled"));
    await agent.chats[0]?.settled;
    await tick();
    expect(agent.chats.map((chat) => chat.text)).toEqual(["long"]);
    expect(agent.cancelledChats.slice(2)).toEqual([{ text: "waiting", reason: "cancelled by stop" }]);
  });

  it("drops the oldest queued message past the limit with queue_overflow", async () => {
    const agent = new FakeAgent({ isManual: true });
    const actor = new SessionActor({ agent, maxQueue: 2 });
    const running = actor.chatAndWait("running");
    const q1 = actor.chatAndWait("q1");
    const q2 = actor.chatAndWait("q2");
    const q3 = actor.chatAndWait("q3");
    expect(await q1).toEqual({
      ok: false,
      error: { code: "queue_overflow", message: "dropped: more than 2 messages were queued for the session" },
    });
    expect(actor.queueLength).toBe(2);
    for (let index = 0; index < 3; index++) {
      await tick();
      agent.chats[index]?.resolve();
    }
    expect((await Promise.all([running, q2, q3])).map((outcome) => outcome.ok)).toEqual([true, true, true]);
    expect(agent.chats.map((chat) => chat.text)).toEqual(["running", "q2", "q3"]);
  });

  it("a stackable message replaces a queued one of the same type, which is told it was superseded", async () => {
    const agent = new FakeAgent({ isManual: true });
    const actor = new SessionActor({ agent });
    const running = actor.chatAndWait("running");
    const older = actor.chat({ text: "<task_result id='1'/>", type: "task_result", stackable: true });
    const newer = actor.chat({ text: "<task_result id='2'/>", type: "task_result", stackable: true });
    expect(await older).toEqual({
      ok: false,
      error: { code: "cancelled", message: "superseded by a newer stackable message of the same type" },
    });
    await tick();
    agent.chats[0]?.resolve();
    await tick();
    agent.chats[1]?.resolve();
    expect(await running).toMatchObject({ ok: true });
    expect(await newer).toMatchObject({ ok: true, result: "echo: <task_result id='2'/>" });
  });

  it("maps failures: an LLM cause is llm_error, anything else internal", async () => {
    const agent = new FakeAgent({ isManual: true });
    const actor = new SessionActor({ agent });
    const llmFailure = actor.chatAndWait("a");
    await tick();
    agent.chats[0]?.reject(
      new ChatFailedError(
        { code: "rate_limit", retryable: true, name: "RateLimitError", message: "slow down" },
        emptyUsage(),
      ),
    );
    expect(await llmFailure).toEqual({ ok: false, error: { code: "llm_error", message: "slow down" } });
    const bug = actor.chatAndWait("b");
    await tick();
    agent.chats[1]?.reject(new TypeError("x is undefined"));
    expect(await bug).toEqual({ ok: false, error: { code: "internal", message: "x is undefined" } });
  });

  it("runs compact and new in mailbox order", async () => {
    const agent = new FakeAgent();
    const actor = new SessionActor({ agent });
    const chat = actor.chatAndWait("hello");
    const compacted = actor.compact("plans");
    const reset = actor.reset();
    expect(await chat).toMatchObject({ ok: true });
    expect(await compacted).toEqual({ ok: true });
    expect(await reset).toEqual({ ok: true });
    expect(agent.compactCalls).toEqual(["plans"]);
    expect(agent.resetCalls).toBe(1);
    expect(agent.messages).toEqual([]);
    agent.compactResult = false;
    expect(await actor.compact()).toMatchObject({ ok: false, error: { code: "llm_error" } });
  });

  it("post delivers a fire-and-forget message", async () => {
    const agent = new FakeAgent();
    const actor = new SessionActor({ agent });
    actor.post("<task_result/>", { type: "task_result", stackable: true });
    await actor.whenIdle();
    await tick();
    expect(agent.chats.map((chat) => chat.text)).toEqual(["<task_result/>"]);
  });

  it("shutdown answers everything cancelled and refuses later messages", async () => {
    const agent = new FakeAgent({ isManual: true });
    const actor = new SessionActor({ agent });
    const running = actor.chatAndWait("running");
    const queued = actor.chatAndWait("queued");
    await tick();
    const closing = actor.shutdown("the host is shutting down");
    expect(await running).toEqual({
      ok: false,
      error: { code: "cancelled", message: "the host is shutting down" },
    });
    expect(await queued).toMatchObject({ ok: false, error: { code: "cancelled" } });
    await closing;
    expect(actor.isStopped).toBe(true);
    expect(await actor.chatAndWait("late")).toEqual({
      ok: false,
      error: { code: "cancelled", message: "the session is stopped" },
    });
  });

  it("a shutdown for a lost lease answers what runs and waits `unavailable`: the next owner finishes them", async () => {
    const agent = new FakeAgent({ isManual: true });
    const actor = new SessionActor({ agent });
    const running = actor.chatAndWait("running");
    const queued = actor.chatAndWait("queued");
    await tick();
    await actor.shutdown(
      "this host lost the session (not renewed in time); retry the request",
      "unavailable",
    );
    expect(await running).toEqual({
      ok: false,
      error: {
        code: "unavailable",
        message: "this host lost the session (not renewed in time); retry the request",
      },
    });
    expect(await queued).toMatchObject({ ok: false, error: { code: "unavailable" } });
  });

  it("tracks activity with the injected clock, except for passivation's compaction", async () => {
    let now = 1_000;
    const agent = new FakeAgent();
    const actor = new SessionActor({ agent, now: () => now });
    expect(actor.lastActivityAt).toBe(1_000);
    now = 2_000;
    await actor.chatAndWait("hi");
    expect(actor.lastActivityAt).toBe(2_000);
    now = 3_000;
    await actor.compact(undefined, { touch: false });
    expect(actor.lastActivityAt).toBe(2_000);
  });
});

describe("SessionActor: a chat's own signal and listener (Agent Protocol streams)", () => {
  it("cancels only its chat: a running one is aborted, a queued one skipped, the others go on", async () => {
    const agent = new FakeAgent({ isManual: true });
    const actor = new SessionActor({ agent });
    const running = new AbortController();
    const queued = new AbortController();
    const first = actor.chat({ text: "first", signal: running.signal });
    const second = actor.chat({ text: "second", signal: queued.signal });
    const third = actor.chat({ text: "third" });
    await tick();
    queued.abort();
    running.abort();
    expect(await first).toMatchObject({ ok: false, error: { code: "cancelled" } });
    expect(await second).toMatchObject({ ok: false, error: { code: "cancelled" } });
    await tick();
    expect(agent.chats.map((chat) => chat.text)).toEqual(["first", "third"]);
    agent.chats[1]?.resolve();
    expect(await third).toMatchObject({ ok: true, result: "echo: third" });
  });

  it("hands the chat's listener to the agent for that chat only", async () => {
    const agent = new FakeAgent();
    const seen: ChatOptions[] = [];
    const chat = agent.chat.bind(agent);
    agent.chat = (text, options) => {
      seen.push(options ?? {});
      return chat(text, options);
    };
    const actor = new SessionActor({ agent });
    const onEvent = () => {};
    await actor.chat({ text: "observed", onEvent });
    await actor.chat({ text: "not observed" });
    expect(seen.map((options) => options.onEvent)).toEqual([onEvent, undefined]);
  });
});

describe("SessionActor: explicit wiring", () => {
  it("its persisted snapshot is plain JSON holding the queue, not the session the machine runs on", async () => {
    const agent = new FakeAgent({ isManual: true });
    const actor = new SessionActor({ agent });
    const running = actor.chatAndWait("running");
    const queued = actor.chatAndWait("queued");
    await tick();
    const snapshot = actor.getPersistedSnapshot() as { context: Record<string, unknown> };
    expect(JSON.parse(JSON.stringify(snapshot))).toEqual(snapshot);
    expect(snapshot.context).not.toHaveProperty("deps");
    expect(snapshot.context.queue).toMatchObject([{ kind: "chat", text: "queued" }]);
    expect(JSON.stringify(snapshot)).not.toContain('"chats"');
    agent.chats[0]?.resolve();
    await running;
    await tick();
    agent.chats[1]?.resolve();
    await queued;
  });
});

/** A {@link FakeAgent} that records the session machine's StateChanged events. */
class ReportingAgent extends FakeAgent {
  readonly states: unknown[] = [];
  /** Called with each state after it is recorded (e.g. to send a message from inside a report). */
  onState: ((state: unknown) => void) | undefined;

  report(body: EventBody): void {
    if (body.kind !== "StateChanged" || body.machine !== "session") return;
    this.states.push(body.state);
    this.onState?.(body.state);
  }
}

/** Past the mailbox's linger of 0 ms: an idle session has dropped its mailbox actor by then. */
const lingerOver = () => new Promise<void>((resolve) => setTimeout(resolve, 2));

describe("SessionActor: an idle session holds no mailbox actor", () => {
  it("reports the mailbox's states as one machine across idle spells: idle once, then each change", async () => {
    const agent = new ReportingAgent();
    const actor = new SessionActor({ agent, mailboxLingerMs: 0 });
    expect(agent.states).toEqual(["idle"]);
    expect(actor.state).toBe("idle");
    await actor.chat({ text: "one" });
    await lingerOver();
    expect(agent.states).toEqual(["idle", "processing", "idle"]);
    expect(actor.state).toBe("idle");
    // Back to back (the same mailbox), then after an idle spell (a new one): the same stream.
    await actor.chat({ text: "two" });
    await lingerOver();
    expect(await actor.compact()).toEqual({ ok: true });
    await lingerOver();
    expect(agent.states).toEqual(["idle", "processing", "idle", "processing", "idle", "compacting", "idle"]);
    await actor.shutdown();
    expect(agent.states.at(-1)).toBe("stopped");
    expect(actor.state).toBe("stopped");
    expect(actor.isStopped).toBe(true);
  });

  it("a session shut down while idle still reports its mailbox stopped, and refuses later messages", async () => {
    const agent = new ReportingAgent();
    const actor = new SessionActor({ agent, mailboxLingerMs: 0 });
    await actor.chat({ text: "before" });
    await lingerOver();
    expect(actor.isStopped).toBe(false);
    await actor.shutdown();
    expect(agent.states).toEqual(["idle", "processing", "idle", "stopped"]);
    expect(actor.isStopped).toBe(true);
    expect(actor.isIdle).toBe(false);
    expect(await actor.chatAndWait("late")).toEqual({
      ok: false,
      error: { code: "cancelled", message: "the session is stopped" },
    });
  });

  it("stop on an idle session changes nothing; the next chat runs", async () => {
    const agent = new ReportingAgent();
    const actor = new SessionActor({ agent, mailboxLingerMs: 0 });
    expect(actor.stop()).toEqual({ ok: true });
    expect(actor.isIdle).toBe(true);
    expect(actor.queueLength).toBe(0);
    await actor.whenIdle();
    expect(await actor.chatAndWait("after")).toMatchObject({ ok: true, result: "echo: after" });
    await lingerOver();
    expect(actor.stop()).toEqual({ ok: true });
    expect(await actor.chatAndWait("again")).toMatchObject({ ok: true, result: "echo: again" });
    await tick();
    expect(agent.states).toEqual(["idle", "processing", "idle", "processing", "idle"]);
  });

  it("keeps queue limits, coalescing and order for messages that find the mailbox dropped", async () => {
    const agent = new FakeAgent({ isManual: true });
    const actor = new SessionActor({ agent, maxQueue: 1, mailboxLingerMs: 0 });
    const runs = async () => {
      const running = actor.chatAndWait("running");
      const overflowed = actor.chatAndWait("overflowed");
      const note = actor.chat({ text: "note 1", type: "note", stackable: true });
      const newer = actor.chat({ text: "note 2", type: "note", stackable: true });
      await tick();
      agent.chats.at(-1)?.resolve();
      expect(await running).toMatchObject({ ok: true, result: "echo: running" });
      expect(await overflowed).toEqual({
        ok: false,
        error: {
          code: "queue_overflow",
          message: "dropped: more than 1 messages were queued for the session",
        },
      });
      expect(await note).toMatchObject({ ok: false, error: { code: "cancelled" } });
      await tick();
      agent.chats.at(-1)?.resolve();
      expect(await newer).toMatchObject({ ok: true, result: "echo: note 2" });
      await actor.whenIdle();
      await lingerOver();
    };
    await runs();
    await runs();
    expect(agent.chats.map((chat) => chat.text)).toEqual(["running", "note 2", "running", "note 2"]);
    expect(agent.overlapped).toBe(false);
  });

  it("a message sent from inside the report of `idle` runs on the same mailbox, in order", async () => {
    const agent = new ReportingAgent({ isManual: true });
    const actor = new SessionActor({ agent, mailboxLingerMs: 0 });
    let second: Promise<unknown> | undefined;
    agent.onState = (state) => {
      if (state === "idle" && agent.chats.length === 1 && second === undefined) {
        second = actor.chatAndWait("second");
      }
    };
    const first = actor.chatAndWait("first");
    await tick();
    agent.chats[0]?.resolve();
    expect(await first).toMatchObject({ ok: true, result: "echo: first" });
    await tick();
    expect(agent.chats.map((chat) => chat.text)).toEqual(["first", "second"]);
    expect(actor.isIdle).toBe(false);
    expect(actor.state).toBe("processing");
    const third = actor.chatAndWait("third");
    expect(actor.queueLength).toBe(1);
    agent.chats[1]?.resolve();
    expect(await second).toMatchObject({ ok: true, result: "echo: second" });
    await tick();
    agent.chats[2]?.resolve();
    expect(await third).toMatchObject({ ok: true, result: "echo: third" });
    await actor.whenIdle();
    expect(agent.states).toEqual(["idle", "processing", "idle", "processing", "idle"]);
    expect(agent.overlapped).toBe(false);
  });

  it("an idle session's persisted snapshot is that of a mailbox back in idle after a message", async () => {
    const mailbox = createActor(
      sessionMachine.provide({
        actors: {
          runMessage: fromCallback(({ sendBack }) => {
            queueMicrotask(() =>
              sendBack({ type: "operation.done", output: { kind: "chat", result: "", usage: emptyUsage() } }),
            );
          }),
        },
      }),
      { input: {} },
    ).start();
    mailbox.send({
      type: "enqueue",
      message: { kind: "chat", id: "m1", text: "hi", type: "user", stackable: false, depth: 0 },
    });
    await new Promise<void>((resolve) =>
      mailbox.subscribe((snapshot) => snapshot.value === "idle" && resolve()),
    );
    const used = JSON.parse(JSON.stringify(mailbox.getPersistedSnapshot()));

    const actor = new SessionActor({ agent: new FakeAgent(), mailboxLingerMs: 0 });
    expect(actor.getPersistedSnapshot()).toEqual(used);
    await actor.chat({ text: "hi" });
    await tick();
    expect(actor.getPersistedSnapshot()).toEqual(used);
    await lingerOver();
    expect(actor.getPersistedSnapshot()).toEqual(used);
  });
});
