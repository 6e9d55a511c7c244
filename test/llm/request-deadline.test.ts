import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CancelledError, RequestTimeoutError } from "../../src/llm/errors.js";
import { RequestDeadline } from "../../src/llm/request-deadline.js";

/** The deadline's timers, driven by fake time: which limit stops the request, and when it may. */
describe("RequestDeadline", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("the idle limit starts at the first chunk and starts over with every chunk", () => {
    const deadline = new RequestDeadline(undefined, { firstByteMs: 1_000, idleMs: 100, totalMs: 10_000 });
    vi.advanceTimersByTime(900);
    deadline.markProgress();
    // The first-byte limit no longer applies.
    vi.advanceTimersByTime(99);
    for (let chunk = 0; chunk < 50; chunk++) {
      deadline.markProgress();
      vi.advanceTimersByTime(99);
    }
    expect(deadline.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(deadline.signal.aborted).toBe(true);
    expect(deadline.stopError).toBeInstanceOf(RequestTimeoutError);
    expect(deadline.stopError?.message).toBe(
      "the model sent nothing for 100 ms mid-stream (stream idle timeout)",
    );
    expect(deadline.stopError?.retryable).toBe(false);
  });

  it("without a first chunk, the first-byte limit fires, not the idle one", () => {
    const deadline = new RequestDeadline(undefined, { firstByteMs: 1_000, idleMs: 100, totalMs: 10_000 });
    vi.advanceTimersByTime(999);
    expect(deadline.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(deadline.stopError?.message).toContain("time to first byte");
  });

  it("the total limit still fires on a stream that keeps sending", () => {
    const deadline = new RequestDeadline(undefined, { firstByteMs: 1_000, idleMs: 100, totalMs: 500 });
    for (let elapsed = 0; elapsed < 500; elapsed += 50) {
      deadline.markProgress();
      vi.advanceTimersByTime(50);
    }
    expect(deadline.stopError?.message).toBe("the generation did not finish within 500 ms");
  });

  it("a caller's abort wins over a later timer; dispose and late chunks arm nothing", () => {
    const controller = new AbortController();
    const deadline = new RequestDeadline(controller.signal, { idleMs: 100, totalMs: 500 });
    deadline.markProgress();
    controller.abort();
    vi.advanceTimersByTime(1_000);
    expect(deadline.stopError).toBeInstanceOf(CancelledError);

    const finished = new RequestDeadline(undefined, { idleMs: 100, totalMs: 500 });
    finished.markProgress();
    finished.dispose();
    finished.markProgress();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(1_000);
    expect(finished.signal.aborted).toBe(false);
  });
});
