import { describe, expect, it, vi } from "vitest";
import { deadlineSignal, deadlineTimer } from "../../src/timers/deadline-signal.js";
import { sleep } from "../../src/timers/sleep.js";

/**
 * A chat's deadline as a signal. Its clock is a variable here: the timer firing while the clock
 * still reads before the deadline (what a loaded event loop does to `AbortSignal.timeout`) must not
 * abort it.
 */
describe("deadlineSignal", () => {
  it("does not abort while the clock reads before the deadline, though its timer has fired", async () => {
    let clock = 1_000;
    const signal = deadlineSignal(1_005, () => clock);
    // Its 5 ms timer has fired (several times over) with the clock standing still.
    await sleep(60);
    expect(signal.aborted).toBe(false);
    clock = 1_004;
    await sleep(30);
    expect(signal.aborted).toBe(false);
    clock = 1_005;
    await new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
    expect(signal.reason).toBeInstanceOf(DOMException);
    expect((signal.reason as DOMException).name).toBe("TimeoutError");
  });

  it("is aborted at once for a deadline already passed", () => {
    const signal = deadlineSignal(Date.now() - 1);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as DOMException).name).toBe("TimeoutError");
  });

  it("called off, holds no timer and never aborts, even once the deadline has passed", async () => {
    let clock = 1_000;
    const timer = deadlineTimer(1_020, () => clock);
    timer.clear();
    clock = 2_000;
    await sleep(60);
    expect(timer.signal.aborted).toBe(false);
    // Nothing of it is left for the event loop.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      const other = deadlineTimer(Date.now() + 60_000);
      expect(vi.getTimerCount()).toBe(1);
      other.clear();
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
