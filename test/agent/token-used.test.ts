import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createUsage } from "../../src/llm/types.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * SPEC §2.4 and §2.6: `tokenUsed` is the LAST request's prompt + completion (every request re-sends
 * the whole context, so a sum would overstate it N-fold); the usage a chat returns is the sum.
 */

const noop = defineTool({
  name: "noop",
  description: "Does nothing.",
  parameters: z.object({}),
  execute: () => "ok",
});

describe("token accounting", () => {
  it("tokenUsed is overwritten by each request, the returned usage is the sum", async () => {
    const { agent, eventsOf } = await createTestAgent({
      script: [
        { toolCalls: [{ name: "noop" }], usage: { prompt: 1000, completion: 50, cached: 10 } },
        { toolCalls: [{ name: "noop" }], usage: { prompt: 1100, completion: 60, cached: 900 } },
        { text: "done", usage: { prompt: 1200, completion: 70, cached: 1000 } },
      ],
      tools: [noop],
    });
    const { usage } = await agent.chat("go");

    expect(agent.tokenUsed).toBe(1270);
    expect(agent.contextRatio).toBeCloseTo(1270 / 128_000, 10);
    expect(usage).toEqual({ prompt: 3300, completion: 180, total: 3480, cached: 1910 });
    const [completed] = eventsOf("ChatCompleted");
    expect(completed?.usage).toEqual(usage);
    expect(completed?.tokenUsed).toBe(1270);
  });

  it("each chat replaces tokenUsed; usage is per chat, not per session", async () => {
    const { agent } = await createTestAgent({
      script: [
        { text: "one", usage: { prompt: 500, completion: 20 } },
        { text: "two", usage: { prompt: 300, completion: 5 } },
      ],
    });
    expect((await agent.chat("first")).usage).toEqual(createUsage(500, 20));
    expect(agent.tokenUsed).toBe(520);
    expect((await agent.chat("second")).usage).toEqual(createUsage(300, 5));
    expect(agent.tokenUsed).toBe(305);
  });
});
