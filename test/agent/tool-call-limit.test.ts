import { describe, expect, it } from "vitest";
import { ToolCallLimit } from "../../src/agent/tool-call-limit.js";
import { ConfigurationError } from "../../src/errors/configuration-error.js";

/** Lets every queued microtask run. */
const settle = () => new Promise((resolve) => setImmediate(resolve));

/** A task the test finishes by hand, noting when it started. */
function heldTask(name: string, started: string[]) {
  let finish!: (value: string) => void;
  let fail!: (error: Error) => void;
  const task = () => {
    started.push(name);
    return new Promise<string>((resolve, reject) => {
      finish = resolve;
      fail = reject;
    });
  };
  return { task, finish: (value: string) => finish(value), fail: (error: Error) => fail(error) };
}

describe("ToolCallLimit", () => {
  it("starts a call under the cap at once, in the caller's turn", () => {
    const limit = new ToolCallLimit(2);
    const started: string[] = [];
    void limit.run(heldTask("a", started).task);
    expect(started).toEqual(["a"]);
    expect(limit.running).toBe(1);
  });

  it("queues calls over the cap and starts them first come first served as places free", async () => {
    const limit = new ToolCallLimit(2);
    const started: string[] = [];
    const tasks = ["a", "b", "c", "d"].map((name) => heldTask(name, started));
    const results = tasks.map((held) => limit.run(held.task));
    expect(started).toEqual(["a", "b"]);
    expect([limit.running, limit.waiting]).toEqual([2, 2]);

    tasks[1]!.finish("b done");
    await expect(results[1]).resolves.toBe("b done");
    await settle();
    expect(started).toEqual(["a", "b", "c"]);
    expect([limit.running, limit.waiting]).toEqual([2, 1]);

    // A failed call frees its place too; its caller sees the failure.
    tasks[0]!.fail(new Error("a failed"));
    await expect(results[0]).rejects.toThrow("a failed");
    await settle();
    expect(started).toEqual(["a", "b", "c", "d"]);

    tasks[2]!.finish("c done");
    tasks[3]!.finish("d done");
    await expect(Promise.all(results.slice(2))).resolves.toEqual(["c done", "d done"]);
    expect([limit.running, limit.waiting]).toEqual([0, 0]);
  });

  it("hands a freed place to the call waiting, not to one that arrives meanwhile", async () => {
    const limit = new ToolCallLimit(1);
    const started: string[] = [];
    const first = heldTask("first", started);
    const waiting = heldTask("waiting", started);
    const running = limit.run(first.task);
    const queued = limit.run(waiting.task);
    first.finish("done");
    await running;
    const late = heldTask("late", started);
    void limit.run(late.task);
    await settle();
    expect(started).toEqual(["first", "waiting"]);
    expect([limit.running, limit.waiting]).toEqual([1, 1]);
    waiting.finish("done");
    await queued;
    await settle();
    expect(started).toEqual(["first", "waiting", "late"]);
  });

  it("refuses a cap that is not a positive integer", () => {
    for (const cap of [0, -1, 2.5, Number.NaN]) {
      expect(() => new ToolCallLimit(cap)).toThrow(ConfigurationError);
    }
  });
});
