import { describe, expect, it } from "vitest";
import { type CoalescerTimers, StreamCoalescer } from "../../src/protocol/stream-coalescer.js";

/** Timers fired by hand. */
function manualTimers(): CoalescerTimers & { fire(): void; pending(): number } {
  let callbacks = new Map<number, () => void>();
  let next = 0;
  return {
    setTimeout: (callback) => {
      callbacks.set(++next, callback);
      return next;
    },
    clearTimeout: (handle) => callbacks.delete(handle as number),
    fire: () => {
      const due = [...callbacks.values()];
      callbacks = new Map();
      for (const callback of due) callback();
    },
    pending: () => callbacks.size,
  };
}

describe("StreamCoalescer", () => {
  it("joins deltas into one piece until the interval is up", () => {
    const sent: string[] = [];
    const timers = manualTimers();
    const coalescer = new StreamCoalescer({ send: (text) => sent.push(text), timers });
    for (const delta of ["a", "b", "c"]) coalescer.push(delta);
    expect(sent).toEqual([]);
    expect(timers.pending()).toBe(1);
    timers.fire();
    expect(sent).toEqual(["abc"]);
    coalescer.push("d");
    coalescer.flush();
    expect(sent).toEqual(["abc", "d"]);
    expect(timers.pending()).toBe(0);
  });

  it("sends a piece as soon as it reaches the byte limit, splitting only between code points", () => {
    const sent: string[] = [];
    const timers = manualTimers();
    const coalescer = new StreamCoalescer({ send: (text) => sent.push(text), maxBytes: 8, timers });
    coalescer.push("1234567😀890");
    expect(sent).toEqual(["1234567"]);
    coalescer.push("x".repeat(20));
    coalescer.flush();
    expect(sent.join("")).toBe(`1234567😀890${"x".repeat(20)}`);
    for (const piece of sent) {
      expect(Buffer.byteLength(piece)).toBeLessThanOrEqual(8);
      expect(piece.isWellFormed()).toBe(true);
    }
  });

  it("sends nothing for nothing", () => {
    const sent: string[] = [];
    const coalescer = new StreamCoalescer({ send: (text) => sent.push(text), timers: manualTimers() });
    coalescer.push("");
    coalescer.flush();
    expect(sent).toEqual([]);
  });
});
