import { describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { quietGcFrom } from "../../src/config/runtime-config.js";
import { fullCollection, QuietCollector, type QuietCollectorTimers } from "../../src/host/quiet-collector.js";
import { SLOW, startHostFixture } from "./host-fixture.js";

const MB = 1024 * 1024;

/** Timers the test fires by hand: each armed one, with its delay, until it fires or is cleared. */
class ManualTimers implements QuietCollectorTimers {
  readonly armed = new Map<number, { callback: () => void; ms: number }>();
  #next = 0;

  setTimeout(callback: () => void, ms: number): unknown {
    const id = ++this.#next;
    this.armed.set(id, { callback, ms });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.armed.delete(handle as number);
  }

  /** The delays of the timers armed now. */
  get delays(): number[] {
    return [...this.armed.values()].map((timer) => timer.ms);
  }

  /** Fires every armed timer (as their time would have come). */
  fire(): void {
    const due = [...this.armed.entries()];
    this.armed.clear();
    for (const [, timer] of due) timer.callback();
  }
}

/**
 * A collector on a pretend heap: `heap.committed` is what V8 would hold; each collection gives
 * back `heap.gain` of it (a share of what it held).
 */
function collectorOnHeap(options: { rounds?: number; committed?: number; gain?: number } = {}) {
  const timers = new ManualTimers();
  const heap = { committed: options.committed ?? 100 * MB, gain: options.gain ?? 0.3, collections: 0 };
  const collector = new QuietCollector({
    quietMs: 10_000,
    minGrowthBytes: 16 * MB,
    roundGapMs: 1_000,
    ...(options.rounds === undefined ? {} : { rounds: options.rounds }),
    collect: () => {
      heap.collections++;
      heap.committed -= heap.committed * heap.gain;
    },
    heapCommitted: () => heap.committed,
    timers,
  });
  return { collector, timers, heap };
}

describe("QuietCollector: a quiet host gives a burst's memory back", () => {
  it("collects once the last request in flight has ended and the quiet time passed, when the heap grew", () => {
    const { collector, timers, heap } = collectorOnHeap({ rounds: 1 });
    collector.begin();
    collector.begin();
    heap.committed += 200 * MB; // the burst
    collector.end();
    // One request still in flight: the host is busy, nothing is armed.
    expect(timers.delays).toEqual([]);
    collector.end();
    expect(timers.delays).toEqual([10_000]);
    timers.fire();
    expect(heap.collections).toBe(1);
  });

  it("never collects while a request is in flight: a request that starts calls the pending collection off", () => {
    const { collector, timers, heap } = collectorOnHeap();
    collector.begin();
    heap.committed += 200 * MB;
    collector.end();
    expect(timers.delays).toEqual([10_000]);
    collector.begin();
    expect(timers.delays).toEqual([]);
    timers.fire();
    expect(heap.collections).toBe(0);
  });

  it("does not collect when the heap did not grow by the threshold since the last collection", () => {
    const { collector, timers, heap } = collectorOnHeap();
    collector.begin();
    heap.committed += 10 * MB; // a few chats: not worth a full collection's pause
    collector.end();
    timers.fire();
    expect(heap.collections).toBe(0);
    expect(timers.delays).toEqual([]);
  });

  it("runs further rounds while each gives back a noticeable share, then stops until the next quiet stretch", () => {
    const { collector, timers, heap } = collectorOnHeap({ rounds: 3 });
    collector.begin();
    heap.committed += 200 * MB;
    collector.end();
    timers.fire();
    expect(heap.collections).toBe(1);
    expect(timers.delays).toEqual([1_000]);
    timers.fire();
    expect(heap.collections).toBe(2);
    timers.fire();
    expect(heap.collections).toBe(3);
    // At most `rounds` in one quiet stretch.
    expect(timers.delays).toEqual([]);
    // Quiet on: nothing more happens without a new request.
    timers.fire();
    expect(heap.collections).toBe(3);
  });

  it("stops the rounds when two in a row give back little", () => {
    const { collector, timers, heap } = collectorOnHeap({ rounds: 5, gain: 0.01 });
    collector.begin();
    heap.committed += 200 * MB;
    collector.end();
    timers.fire();
    expect(heap.collections).toBe(1);
    timers.fire();
    expect(heap.collections).toBe(2);
    expect(timers.delays).toEqual([]);
  });

  it("goes on after one small round when the next gives back much (Node 20 compacts a fragmented heap over several)", () => {
    const { collector, timers, heap } = collectorOnHeap({ rounds: 8 });
    const gains = [0.02, 0.35, 0.03, 0.2, 0.01, 0.01];
    collector.begin();
    heap.committed += 200 * MB;
    collector.end();
    // Each collection gives back the next share of the list.
    heap.gain = gains[0]!;
    for (let fired = 0; fired < gains.length; fired++) {
      heap.gain = gains[heap.collections]!;
      timers.fire();
    }
    expect(heap.collections).toBe(6);
    expect(timers.delays).toEqual([]);
  });

  it("a request between two rounds stops the rounds; the next quiet stretch counts growth from the last collection", () => {
    const { collector, timers, heap } = collectorOnHeap({ rounds: 3 });
    collector.begin();
    heap.committed += 200 * MB;
    collector.end();
    timers.fire();
    expect(timers.delays).toEqual([1_000]);
    collector.begin();
    expect(timers.delays).toEqual([]);
    heap.committed += 8 * MB; // below the threshold over what the first round left
    collector.end();
    timers.fire();
    expect(heap.collections).toBe(1);
  });

  it("a host busy without a request in flight (a resumed chat) is not collected; it looks again a quiet time later", () => {
    const timers = new ManualTimers();
    let committed = 100 * MB;
    let collections = 0;
    let isBusy = true;
    const collector = new QuietCollector({
      quietMs: 10_000,
      rounds: 1,
      collect: () => {
        collections++;
      },
      heapCommitted: () => committed,
      isBusy: () => isBusy,
      timers,
    });
    collector.begin();
    committed += 200 * MB;
    collector.end();
    timers.fire();
    expect(collections).toBe(0);
    expect(timers.delays).toEqual([10_000]);
    isBusy = false;
    timers.fire();
    expect(collections).toBe(1);
  });

  it("an end without a begin does not make the count negative (a busy host stays busy)", () => {
    const { collector, timers, heap } = collectorOnHeap({ rounds: 1 });
    collector.end();
    collector.begin();
    heap.committed += 200 * MB;
    expect(timers.delays).toEqual([]);
    timers.fire();
    expect(heap.collections).toBe(0);
  });

  it("after close nothing is armed or collected", () => {
    const { collector, timers, heap } = collectorOnHeap();
    collector.begin();
    heap.committed += 200 * MB;
    collector.end();
    collector.close();
    expect(timers.delays).toEqual([]);
    collector.begin();
    collector.end();
    timers.fire();
    expect(heap.collections).toBe(0);
  });

  it("a collection that throws is logged and the host goes on", () => {
    const timers = new ManualTimers();
    const lines: string[] = [];
    let committed = 100 * MB;
    const collector = new QuietCollector({
      quietMs: 10_000,
      collect: () => {
        throw new Error("no gc here");
      },
      heapCommitted: () => committed,
      timers,
      log: (line) => lines.push(line),
    });
    collector.begin();
    committed += 200 * MB;
    collector.end();
    expect(() => timers.fire()).not.toThrow();
    expect(lines.join("\n")).toMatch(/quiet collection failed: Error: no gc here/);
  });

  it("refuses a quiet time that is not a positive number", () => {
    expect(() => new QuietCollector({ quietMs: 0, collect: () => {} })).toThrow(/quietMs must be a positive/);
    expect(() => new QuietCollector({ quietMs: Number.NaN, collect: () => {} })).toThrow(
      /quietMs must be a positive/,
    );
  });

  it("this Node gives the collector a full collection that frees unreachable objects", async () => {
    const collect = fullCollection();
    expect(collect).toBeTypeOf("function");
    const ref = (() => new WeakRef({ big: new Array(1000).fill("x") }))();
    // A WeakRef's target is held until the end of the job that made it.
    await new Promise((resolve) => setImmediate(resolve));
    collect?.();
    expect(ref.deref()).toBeUndefined();
  });
});

describe("the host tells its quiet collector when requests start and end", () => {
  it("arms the collection only once no request is in flight, and calls it off when one arrives", async () => {
    const bus = new LocalBus();
    const timers = new ManualTimers();
    let committed = 100 * MB;
    let collections = 0;
    const quietCollector = new QuietCollector({
      quietMs: 10_000,
      rounds: 1,
      collect: () => {
        collections++;
      },
      heapCommitted: () => committed,
      timers,
    });
    const fixture = await startHostFixture(bus, { host: { quietCollector } });
    try {
      const reply = await fixture.request("bot", "chat", { session: "s1", text: "hi" });
      expect(reply).toMatchObject({ ok: true, result: "echo: hi" });
      expect(timers.delays).toEqual([10_000]);
      // A slow chat in flight: the pending collection is called off and nothing is armed.
      const slow = fixture.request("bot", "chat", { session: "s2", text: SLOW, id: "slow-1" });
      await expect.poll(() => timers.delays).toEqual([]);
      await expect.poll(() => fixture.host.sessions.hasBusySession).toBe(true);
      committed += 200 * MB;
      timers.fire();
      expect(collections).toBe(0);
      const cancelled = await fixture.request("bot", "control", {
        session: "s2",
        command: "cancel",
        id: "slow-1",
      });
      expect(cancelled).toMatchObject({ ok: true });
      await slow;
      await expect.poll(() => timers.delays).toEqual([10_000]);
      await expect.poll(() => fixture.host.sessions.hasBusySession).toBe(false);
      timers.fire();
      expect(collections).toBe(1);
    } finally {
      await fixture.close();
      quietCollector.close();
    }
  });
});

describe("--quiet-gc", () => {
  it("defaults to 10 s, takes a duration or off, and refuses anything else with a clear message", () => {
    expect(quietGcFrom({}, {})).toBe(10_000);
    expect(quietGcFrom({ "quiet-gc": "30s" }, {})).toBe(30_000);
    expect(quietGcFrom({ "quiet-gc": "off" }, {})).toBeUndefined();
    expect(quietGcFrom({}, { AGENTLOOP_QUIET_GC: "OFF" })).toBeUndefined();
    expect(quietGcFrom({ "quiet-gc": "1m" }, { AGENTLOOP_QUIET_GC: "off" })).toBe(60_000);
    expect(() => quietGcFrom({ "quiet-gc": "soon" }, {})).toThrow(/--quiet-gc must be a duration/);
    expect(() => quietGcFrom({ "quiet-gc": "10ms" }, {})).toThrow(/--quiet-gc must be off or at least 1s/);
  });
});
