import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTodoListToolSet, TODO_LIST_PROMPT } from "../../src/tools/builtin/todo-list.js";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { createTempHistories, createTestAgent } from "../support/agent-harness.js";

/**
 * The system prompt is the agent's own followed by each ToolSet's static prompt; it
 * heads every request and is never stored in the history.
 */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

describe("the system prompt", () => {
  it("is systemPrompt + ToolSet prompts, first in every request, never in the history", async () => {
    const history = histories.open();
    const style = createToolSet({ name: "style", tools: [], prompt: "Answer in one sentence." });
    const { agent, backend } = await createTestAgent({
      script: [
        { toolCalls: [{ name: "todo_list", arguments: { plan: [] } }] },
        { text: "Done." },
        { text: "Again." },
      ],
      toolSets: [createTodoListToolSet(), style],
      history,
      options: { systemPrompt: "You are terse." },
    });
    await agent.chat("one");
    await agent.chat("two");

    const expected = {
      role: "system",
      content: `You are terse.\n\n${TODO_LIST_PROMPT}\n\nAnswer in one sentence.`,
    };
    expect(backend.requests).toHaveLength(3);
    for (const request of backend.requests) {
      expect(request.messages[0]).toEqual(expected);
      expect(request.messages.filter((message) => message.role === "system")).toHaveLength(1);
    }
    const stored = await history.restore();
    expect(stored.length).toBeGreaterThan(0);
    expect(stored.some((message) => message.role === "system")).toBe(false);
    expect(agent.messages.some((message) => message.role === "system")).toBe(false);
  });

  it('defaults to "You are a helpful assistant."', async () => {
    const { agent, backend } = await createTestAgent({ script: [{ text: "hi" }] });
    await agent.chat("hello");
    expect(backend.requests[0]?.messages[0]).toEqual({
      role: "system",
      content: "You are a helpful assistant.",
    });
  });
});
