import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createTodoListToolSet } from "../../src/tools/builtin/todo-list.js";
import { createTempHistories, createTestAgent } from "../support/agent-harness.js";

/** `reset()` (`/new`) clears the context, the history and the ToolSets' state. */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

describe("agent.reset()", () => {
  it("clears context, history and todo state", async () => {
    const history = histories.open();
    const { agent, backend } = await createTestAgent({
      script: [
        { toolCalls: [{ name: "todo_list", arguments: { plan: [{ step: "Pack", status: "pending" }] } }] },
        { text: "Planned.", usage: { prompt: 100, completion: 10 } },
        { text: "Fresh start." },
      ],
      toolSets: [createTodoListToolSet()],
      history,
    });
    await agent.chat("plan a trip");
    expect(agent.messages).toHaveLength(4);
    expect(agent.tokenUsed).toBe(110);

    await agent.reset();
    expect(agent.messages).toEqual([]);
    expect(agent.tokenUsed).toBe(0);
    expect(agent.contextRatio).toBe(0);
    expect(await history.restore()).toEqual([]);

    // No reminder of the old plan, no old messages.
    await agent.chat("hello");
    expect(backend.requests[2]?.messages.slice(1)).toEqual([{ role: "user", content: "hello" }]);
  });
});
