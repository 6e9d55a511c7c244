import { describe, expect, it } from "vitest";
import { z } from "zod";
import { InMemoryContextHistory } from "../../src/context/in-memory-history.js";
import { createControlledTool, createTestAgent, settle, waitUntil } from "../support/agent-harness.js";

/**
 * Tool results are back-filled in the order the model made the calls, not the order
 * they finished in, each linked by its call id.
 */

describe("tool results back-filled in call order", () => {
  it("three calls finishing c, a, b are sent back as a, b, c", async () => {
    const slow = createControlledTool("slow", z.object({ key: z.string() }));
    const history = new InMemoryContextHistory();
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [
        {
          text: "Checking three things.",
          toolCalls: ["a", "b", "c"].map((key) => ({ id: `call_${key}`, name: "slow", arguments: { key } })),
        },
        { text: "All three checked." },
      ],
      tools: [slow.tool],
      history,
    });
    const chat = agent.chat("check a, b and c");
    await waitUntil(() => slow.calls.length === 3);
    for (const key of ["c", "a", "b"]) {
      slow.call(key).resolve(`result ${key}`);
      await settle();
    }
    expect((await chat).result).toBe("All three checked.");

    expect(eventsOf("ToolCallCompleted").map((event) => event.toolCallId)).toEqual([
      "call_c",
      "call_a",
      "call_b",
    ]);
    const expected = [
      { role: "user", content: "check a, b and c" },
      {
        role: "assistant",
        content: "Checking three things.",
        toolCalls: ["a", "b", "c"].map((key) => ({
          id: `call_${key}`,
          name: "slow",
          arguments: `{"key":"${key}"}`,
        })),
      },
      ...["a", "b", "c"].map((key) => ({
        role: "tool",
        toolCallId: `call_${key}`,
        toolName: "slow",
        content: `result ${key}`,
      })),
    ];
    expect(backend.requests[1]?.messages.slice(1)).toEqual(expected);
    expect(await history.restore()).toEqual([
      ...expected,
      { role: "assistant", content: "All three checked." },
    ]);
  });
});
