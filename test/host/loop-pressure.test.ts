import { afterEach, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { LoopPressure, type PressureTimers } from "../../src/host/loop-pressure.js";
import { type HostFixture, SLOW, startHostFixture } from "./host-fixture.js";

/** Timers fired by hand, with a clock the test moves. */
function manualTime() {
  let now = 0;
  const due: { at: number; callback: () => void; handle: number }[] = [];
  let next = 0;
  const timers: PressureTimers = {
    setTimeout: (callback, ms) => {
      next += 1;
      due.push({ at: now + ms, callback, handle: next });
      return next;
    },
    clearTimeout: (handle) => {
      const index = due.findIndex((timer) => timer.handle === handle);
      if (index >= 0) due.splice(index, 1);
    },
  };
  return {
    timers,
    now: () => now,
    pending: () => due.length,
    /** Moves the clock to `at` and fires the timers due by then (a late loop fires them late). */
    runUntil(at: number) {
      now = at;
      for (;;) {
        const ready = due.filter((timer) => timer.at <= now).sort((a, b) => a.at - b.at)[0];
        if (ready === undefined) return;
        due.splice(due.indexOf(ready), 1);
        ready.callback();
      }
    },
  };
}

describe("LoopPressure", () => {
  it("counts a loop that keeps running late as overloaded, a lone pause not, and recovers", () => {
    const pressure = new LoopPressure({ maxDelayMs: 1_000 });
    expect(pressure.isOverloaded).toBe(false);
    pressure.record(1_500);
    expect(pressure.delayMs).toBe(750);
    expect(pressure.isOverloaded).toBe(false);
    pressure.record(1_500);
    expect(pressure.isOverloaded).toBe(true);
    pressure.record(0);
    pressure.record(0);
    expect(pressure.isOverloaded).toBe(false);
    expect(pressure.delayMs).toBe(281);
    // One long pause (a tool busy on the main thread for 4 s) is over when the next request is
    // read: not refused for it.
    pressure.record(4_000);
    expect(pressure.isOverloaded).toBe(false);
    pressure.record(0);
    expect(pressure.isOverloaded).toBe(false);
  });

  it("measures how late its own timer fires, and stops sampling when closed", () => {
    const time = manualTime();
    const pressure = new LoopPressure({ maxDelayMs: 500, sampleMs: 100, now: time.now, timers: time.timers });
    pressure.start();
    pressure.start();
    expect(time.pending()).toBe(1);
    // On time: nothing late.
    time.runUntil(100);
    expect(pressure.delayMs).toBe(0);
    // The next sample was due at 200 but the loop got to it at 1,400, then at 2,700 (due 1,500):
    // 1,200 ms late twice, smoothed to 600 then 900.
    time.runUntil(1_400);
    expect(pressure.delayMs).toBe(600);
    time.runUntil(2_700);
    expect(pressure.delayMs).toBe(900);
    expect(pressure.isOverloaded).toBe(true);
    pressure.close();
    expect(time.pending()).toBe(0);
  });

  it("refuses a gauge with no limit", () => {
    expect(() => new LoopPressure({ maxDelayMs: 0 })).toThrow(/maxDelayMs must be positive/);
  });
});

describe("AgentHost shedding new chats (--max-loop-delay, --max-chats)", () => {
  let fixture: HostFixture | undefined;
  afterEach(async () => {
    await fixture?.close();
    fixture = undefined;
  });

  it("answers a new chat `overloaded` (retryable, its id echoed) without running it; nested chats and control verbs still pass", async () => {
    const pressure = new LoopPressure({ maxDelayMs: 100 });
    const bus = new LocalBus();
    fixture = await startHostFixture(bus, { host: { loopPressure: pressure } });
    expect(await fixture.request("bot", "chat", { session: "s1", text: "first" })).toMatchObject({
      ok: true,
      result: "echo: first",
    });

    pressure.record(400);
    pressure.record(400);
    const refused = await fixture.request("bot", "chat", { session: "s1", text: "second", id: "r2" });
    expect(refused).toMatchObject({ ok: false, id: "r2", error: { code: "overloaded" } });
    expect((refused as { error: { message: string } }).error.message).toMatch(
      /event loop runs 3\d\d ms behind \(over 100 ms\).*retry shortly/,
    );
    // A new session is refused before it is even built.
    expect(await fixture.request("bot", "chat", { session: "s2", text: "hello" })).toMatchObject({
      ok: false,
      error: { code: "overloaded" },
    });
    expect(fixture.host.sessions.find("bot", "s2")).toBeUndefined();
    // A chat another agent asked (depth > 0) is part of work already taken: it runs.
    expect(await fixture.request("bot", "chat", { session: "s1", text: "nested", depth: 1 })).toMatchObject({
      ok: true,
      result: "echo: nested",
    });
    // Control verbs relieve the host, never refused for it.
    expect(await fixture.request("bot", "control", { session: "s1", command: "new" })).toMatchObject({
      ok: true,
    });
    const prompts = (fixture.backends.get("bot")?.requests ?? []).map(
      (request) => request.messages.at(-1)?.content,
    );
    expect(prompts).toEqual(["first", "nested"]);

    // Back on time: chats are taken again.
    pressure.record(0);
    pressure.record(0);
    expect(await fixture.request("bot", "chat", { session: "s1", text: "third" })).toMatchObject({
      ok: true,
      result: "echo: third",
    });
  });

  it("at --max-chats in progress, answers a new chat `overloaded` at once; nested chats still run, and a freed slot takes chats again", async () => {
    const bus = new LocalBus();
    fixture = await startHostFixture(bus, { host: { maxChats: 2 } });
    const host = fixture.host;
    // Two chats in progress: one streaming until stopped, one queued behind it in the same session.
    const slow = fixture.request("bot", "chat", { session: "s1", text: SLOW }, 30_000);
    const queued = fixture.request("bot", "chat", { session: "s1", text: "behind it" }, 30_000);
    await expect.poll(() => host.chatsInProgress).toBe(2);

    const refused = await fixture.request("bot", "chat", { session: "s2", text: "hello", id: "r1" });
    expect(refused).toMatchObject({ ok: false, id: "r1", error: { code: "overloaded" } });
    expect((refused as { error: { message: string } }).error.message).toMatch(
      /2 chats in progress \(its limit is 2\).*retry shortly/,
    );
    expect(host.sessions.find("bot", "s2")).toBeUndefined();
    // Asked by another agent: counted, never refused.
    expect(await fixture.request("bot", "chat", { session: "s3", text: "nested", depth: 1 })).toMatchObject({
      ok: true,
      result: "echo: nested",
    });

    // Stopping the session ends both of its chats (answered `cancelled`): the slots are free.
    expect(await fixture.request("bot", "control", { session: "s1", command: "stop" })).toMatchObject({
      ok: true,
    });
    expect(await slow).toMatchObject({ ok: false, error: { code: "cancelled" } });
    expect(await queued).toMatchObject({ ok: false });
    expect(host.chatsInProgress).toBe(0);
    expect(await fixture.request("bot", "chat", { session: "s2", text: "again" })).toMatchObject({
      ok: true,
      result: "echo: again",
    });
    expect(host.chatsInProgress).toBe(0);
  });

  it("never sheds without a limit", async () => {
    const bus = new LocalBus();
    fixture = await startHostFixture(bus);
    expect(await fixture.request("bot", "chat", { session: "s1", text: "hi" })).toMatchObject({ ok: true });
  });
});
