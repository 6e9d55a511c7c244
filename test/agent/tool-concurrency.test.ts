import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createControlledTool, createTestAgent, settle, waitUntil } from "../support/agent-harness.js";

/** At most maxConcurrentToolCalls (default 4) tool calls run at once; the rest queue. */

const sixCalls = ["1", "2", "3", "4", "5", "6"].map((key) => ({ name: "slow", arguments: { key } }));

async function runSixCalls(maxConcurrentToolCalls?: number) {
  const slow = createControlledTool("slow", z.object({ key: z.string() }));
  const { agent, eventsOf } = await createTestAgent({
    script: [{ toolCalls: sixCalls }, { text: "done" }],
    tools: [slow.tool],
    options: maxConcurrentToolCalls === undefined ? {} : { maxConcurrentToolCalls },
  });
  const chat = agent.chat("do six things");
  const limit = maxConcurrentToolCalls ?? 4;
  await waitUntil(() => slow.calls.length === limit);
  // Give the queue every chance to over-start before checking.
  for (let round = 0; round < 10; round++) await settle();
  expect(slow.calls).toHaveLength(limit);
  expect(eventsOf("ToolCallStarted")).toHaveLength(limit);

  // Finish them one at a time: each finished call lets exactly one queued call start.
  for (let finished = 0; finished < 6; finished++) {
    slow.calls[finished]!.resolve(`done ${finished + 1}`);
    await settle();
    await settle();
    expect(slow.calls).toHaveLength(Math.min(6, limit + finished + 1));
  }
  expect((await chat).result).toBe("done");
  return slow;
}

describe("tool-call concurrency", () => {
  it("six calls: never more than 4 in flight by default, all six run", async () => {
    const slow = await runSixCalls();
    expect(slow.maxRunning).toBe(4);
    expect(slow.calls.map((call) => call.args.key)).toEqual(["1", "2", "3", "4", "5", "6"]);
  });

  it("maxConcurrentToolCalls = 2 is honoured", async () => {
    const slow = await runSixCalls(2);
    expect(slow.maxRunning).toBe(2);
  });

  it("maxConcurrentToolCalls = Infinity runs every call of a turn at once", async () => {
    const slow = createControlledTool("slow", z.object({ key: z.string() }));
    const { agent } = await createTestAgent({
      script: [{ toolCalls: sixCalls }, { text: "done" }],
      tools: [slow.tool],
      options: { maxConcurrentToolCalls: Number.POSITIVE_INFINITY },
    });
    const chat = agent.chat("do six things");
    await waitUntil(() => slow.calls.length === 6);
    for (const [index, call] of slow.calls.entries()) call.resolve(`done ${index + 1}`);
    expect((await chat).result).toBe("done");
    expect(slow.maxRunning).toBe(6);
  });
});
