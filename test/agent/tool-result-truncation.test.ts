import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/** Results over 8,000 characters reach the model truncated, with a visible marker. */

const big = defineTool({
  name: "big",
  description: "Returns a lot.",
  parameters: z.object({ size: z.number() }),
  execute: ({ size }) => "x".repeat(size),
});

describe("tool result truncation", () => {
  it("a 12,345-character result is cut to 8,000 characters plus the marker; 8,000 exactly is kept", async () => {
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [
        {
          toolCalls: [
            { id: "long", name: "big", arguments: { size: 12_345 } },
            { id: "exact", name: "big", arguments: { size: 8_000 } },
          ],
        },
        { text: "ok" },
      ],
      tools: [big],
    });
    await agent.chat("fetch");
    const [long, exact] = backend.requests[1]!.messages.filter((message) => message.role === "tool");
    const expected = `${"x".repeat(8_000)}\n…[truncated: 12,345 characters, showing the first 8,000]`;
    expect(long?.content).toBe(expected);
    expect(exact?.content).toBe("x".repeat(8_000));
    // The event carries what the model saw.
    expect(eventsOf("ToolCallCompleted").map((event) => event.result)).toEqual([expected, "x".repeat(8_000)]);
    expect(agent.messages.find((message) => message.toolCallId === "long")?.content).toBe(expected);
  });
});
