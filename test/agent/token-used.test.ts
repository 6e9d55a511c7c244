import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createUsage } from "../../src/llm/types.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * `tokenUsed` is the LAST request's prompt + completion (every request re-sends
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

  it("publishes each request's own usage (ModelResponse) and the context ratio's inputs (timeline)", async () => {
    const { agent, eventsOf } = await createTestAgent({
      script: [
        { toolCalls: [{ name: "noop" }], usage: { prompt: 1000, completion: 50, cached: 10 } },
        { text: "done", usage: { prompt: 1200, completion: 70, cached: 1000 } },
      ],
      tools: [noop],
      options: { tokenLimit: 4000, contextCompactRatio: 0.8 },
    });
    await agent.chat("go");

    expect(
      eventsOf("ModelResponse").map((event) => ({
        iteration: event.iteration,
        purpose: event.purpose,
        toolCalls: event.toolCalls,
        usage: event.usage,
      })),
    ).toEqual([
      { iteration: 1, purpose: "chat", toolCalls: 1, usage: createUsage(1000, 50, 10) },
      { iteration: 2, purpose: "chat", toolCalls: 0, usage: createUsage(1200, 70, 1000) },
    ]);
    expect(eventsOf("ModelResponse")[1]?.content).toBe("done");
    expect(eventsOf("ChatStarted")[0]).toMatchObject({
      tokenUsed: 0,
      tokenLimit: 4000,
      contextCompactRatio: 0.8,
    });
    expect(eventsOf("ChatCompleted")[0]).toMatchObject({ tokenUsed: 1270, tokenLimit: 4000 });
  });
});
