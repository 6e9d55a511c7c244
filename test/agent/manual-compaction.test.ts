import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { compactionInstruction, summaryMessage } from "../../machines/compaction.machine.js";
import type { Message } from "../../src/llm/types.js";
import { canCallTools } from "../../src/llm/types.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTempHistories, createTestAgent } from "../support/agent-harness.js";

/** Manual `compact(topic?)` (the `/compact [topic]` command). */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

const ping = defineTool({
  name: "ping",
  description: "Pings.",
  parameters: z.object({}),
  execute: () => "pong",
});
const conversation: Message[] = [
  { role: "user", content: "We have 500 euros for the trip." },
  { role: "assistant", content: "Noted: a 500 euro budget." },
];

describe("manual compaction", () => {
  it("on an empty context is a no-op: no request, no event, no summary written", async () => {
    const history = histories.open();
    // The script is empty: any model request would fail the compaction.
    const { agent, backend, events } = await createTestAgent({ script: [], history });
    expect(await agent.compact()).toBe(true);
    expect(await agent.compact("a topic")).toBe(true);
    expect(backend.requests).toEqual([]);
    expect(events.filter((event) => event.kind !== "StateChanged")).toEqual([]);
    expect(agent.messages).toEqual([]);
    expect(await history.restore()).toEqual([]);
  });

  it("compact(topic): the topic is in the instruction; history and context become the summary", async () => {
    const history = histories.open();
    await history.append(conversation);
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [{ text: "Budget: 500 euros.", usage: { prompt: 400, completion: 9 } }],
      history,
      options: { reasoningEffort: "low" },
    });
    expect(await agent.compact("the budget")).toBe(true);

    const request = backend.requests[0]!;
    expect(request.streaming).toBe(false);
    expect(request.messages[0]?.role).toBe("system");
    const instruction = compactionInstruction("the budget");
    expect(instruction).toContain("the budget");
    expect(request.messages.slice(1)).toEqual([...conversation, { role: "user", content: instruction }]);
    expect(canCallTools(request.options)).toBe(false);
    expect(request.options.reasoningEffort).toBe("low");

    const summary = summaryMessage("Budget: 500 euros.");
    expect(agent.messages).toEqual([summary]);
    expect(await history.restore()).toEqual([summary]);
    expect(agent.tokenUsed).toBe(9);
    expect(eventsOf("ContextCompaction").map((event) => [event.phase, event.topic])).toEqual([
      ["started", "the budget"],
      ["completed", undefined],
    ]);
    expect(eventsOf("ModelResponse")).toEqual([
      expect.objectContaining({ purpose: "compaction", iteration: 0 }),
    ]);
  });

  it("an empty summary: false, and nothing changes", async () => {
    const history = histories.open();
    await history.append(conversation);
    const { agent, eventsOf } = await createTestAgent({ script: [{ text: "" }], history });
    expect(await agent.compact()).toBe(false);
    expect(agent.messages).toEqual(conversation);
    expect(await history.restore()).toEqual(conversation);
    expect(eventsOf("ContextCompaction").map((event) => event.phase)).toEqual(["started", "failed"]);
  });

  it("with tool calls in the history, the summary request keeps the tool definitions with toolChoice none", async () => {
    // Regression pin: Anthropic rejects a
    // request whose history holds tool_use blocks but which defines no tools.
    const { agent, backend } = await createTestAgent({
      script: [{ toolCalls: [{ name: "ping" }] }, { text: "pinged" }, { text: "Pinged once." }],
      tools: [ping],
    });
    await agent.chat("ping");
    expect(await agent.compact()).toBe(true);
    const options = backend.requests[2]!.options;
    expect(options.tools?.map((tool) => tool.name)).toEqual(["ping"]);
    expect(options.toolChoice).toBe("none");
  });
});
