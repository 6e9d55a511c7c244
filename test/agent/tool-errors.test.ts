import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * A throwing tool, an unknown tool, arguments that are not JSON or fail the schema —
 * each becomes an `{"error": …}` result the model sees and a ToolCallFailed event; the chat goes on.
 */

const boom = defineTool({
  name: "boom",
  description: "Always fails.",
  parameters: z.object({}),
  execute: () => {
    throw new Error("disk unreadable at /srv/agent/private/state.db");
  },
});
const typed = defineTool({
  name: "typed",
  description: "Needs a number.",
  parameters: z.object({ n: z.number() }),
  execute: ({ n }) => `n squared is ${n * n}`,
});

describe("tool failures are results the model can react to", () => {
  it("throwing, unknown, invalid JSON and schema failures: error results, ToolCallFailed events, the chat continues", async () => {
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [
        {
          toolCalls: [
            { id: "t1", name: "boom" },
            { id: "t2", name: "missing", arguments: { any: 1 } },
            { id: "t3", name: "typed", arguments: "{not json" },
            { id: "t4", name: "typed", arguments: { n: "seven" } },
            { id: "t5", name: "typed", arguments: { n: 7 } },
          ],
        },
        { text: "I recovered." },
      ],
      tools: [boom, typed],
    });
    const { result } = await agent.chat("try everything");
    expect(result).toBe("I recovered.");

    const results = backend.requests[1]!.messages.filter((message) => message.role === "tool");
    expect(results.map((message) => message.toolCallId)).toEqual(["t1", "t2", "t3", "t4", "t5"]);
    const contents = results.map((message) => message.content as string);
    const errors = contents.slice(0, 4).map((content) => (JSON.parse(content) as { error: string }).error);
    for (const content of contents.slice(0, 4)) expect(Object.keys(JSON.parse(content))).toEqual(["error"]);
    // Sanitised: the message without the host's directories.
    expect(errors[0]).toBe("disk unreadable at state.db");
    expect(contents[1]).toBe('{"error":"tool not found: missing"}');
    expect(errors[2]).toMatch(/not valid JSON/);
    expect(errors[3]).toMatch(/^invalid arguments for tool "typed": n: /);
    expect(contents[4]).toBe("n squared is 49");

    // Tools run concurrently: events come in completion order.
    const failed = eventsOf("ToolCallFailed").sort((a, b) => a.toolCallId.localeCompare(b.toolCallId));
    expect(failed.map((event) => [event.toolCallId, event.toolName, event.result])).toEqual(
      results.slice(0, 4).map((message) => [message.toolCallId, message.toolName, message.content]),
    );
    expect(failed.map((event) => event.error.name)).toEqual([
      "Error",
      "ToolNotFoundError",
      "ToolArgumentsError",
      "ToolArgumentsError",
    ]);
    expect(eventsOf("ToolCallCompleted").map((event) => event.toolCallId)).toEqual(["t5"]);
    expect(eventsOf("ChatCompleted")).toHaveLength(1);
    expect(eventsOf("ChatFailed")).toEqual([]);
  });
});
