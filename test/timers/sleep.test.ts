import { describe, expect, it } from "vitest";
import { sleep } from "../../src/timers/sleep.js";

describe("sleep", () => {
  it("resolves after the wait, and treats a negative wait as none", async () => {
    await expect(sleep(1)).resolves.toBeUndefined();
    await expect(sleep(-5)).resolves.toBeUndefined();
  });

  it("rejects with the signal's reason when it aborts mid-wait", async () => {
    const controller = new AbortController();
    const waiting = sleep(60_000, controller.signal);
    controller.abort(new Error("stopped"));
    await expect(waiting).rejects.toThrow("stopped");
  });

  it("rejects at once when the signal has already aborted", async () => {
    await expect(sleep(60_000, AbortSignal.abort("gone"))).rejects.toBe("gone");
  });
});
