import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { Script } from "../../src/testing/index.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/** OnLog is best-effort: a callback that throws changes nothing about the chat. */

const echo = defineTool({
  name: "echo",
  description: "Echoes.",
  parameters: z.object({ text: z.string() }),
  execute: ({ text }) => text,
});
const script: Script = [
  { toolCalls: [{ name: "echo", arguments: { text: "ping" } }], deltas: ["Let ", "me ", "check."] },
  { deltas: ["pong ", "received"], text: "pong received" },
];

async function run(onLog?: () => void) {
  const harness = await createTestAgent({ script, tools: [echo], options: onLog ? { onLog } : {} });
  const first = await harness.agent.chat("ping?");
  return { harness, first };
}

describe("onLog", () => {
  it("a callback that throws on every event changes nothing", async () => {
    const quiet = await run();
    let calls = 0;
    const noisy = await run(() => {
      calls += 1;
      throw new Error("logger down");
    });
    expect(calls).toBe(noisy.harness.events.length);
    expect(calls).toBeGreaterThan(10);
    expect(noisy.first).toEqual(quiet.first);
    expect(noisy.harness.backend.requests).toEqual(quiet.harness.backend.requests);
    expect(noisy.harness.agent.messages).toEqual(quiet.harness.agent.messages);
    // Every event was still delivered, in the same order, with the same numbering.
    expect(noisy.harness.events.map((event) => [event.kind, event.seq])).toEqual(
      quiet.harness.events.map((event) => [event.kind, event.seq]),
    );
  });
});
