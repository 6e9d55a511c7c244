import { describe, expect, it } from "vitest";
import { InMemoryContextHistory } from "../../src/context/in-memory-history.js";
import { createTodoListToolSet, renderTodoListReminder } from "../../src/tools/builtin/todo-list.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * Every ToolSet's non-empty iterationPromptInjection() is prepended to the user's
 * text; it is part of the user message and persisted with it (todo_list's <TODO_LIST_REMINDER>).
 */

describe("iteration prompt injection", () => {
  it("todo_list's reminder is prepended to the next user message, sent and persisted with it", async () => {
    const history = new InMemoryContextHistory();
    const plan = [
      { step: "Buy milk", status: "completed" },
      { step: "Bake <the> cake", status: "in_progress" },
    ] as const;
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [
        { toolCalls: [{ id: "p1", name: "todo_list", arguments: { plan } }] },
        { text: "Plan recorded." },
        { text: "Baking now." },
      ],
      toolSets: [createTodoListToolSet()],
      history,
    });
    await agent.chat("make a cake");
    // The plan was empty when the first chat began: no reminder.
    expect(backend.requests[0]?.messages[1]).toEqual({ role: "user", content: "make a cake" });

    await agent.chat("what next?");
    const reminder = renderTodoListReminder([...plan]);
    expect(reminder.startsWith("<TODO_LIST_REMINDER>")).toBe(true);
    expect(reminder).toContain("Bake &lt;the&gt; cake");
    const userMessage = { role: "user", content: `${reminder}\n\nwhat next?` };
    expect(backend.requests[2]?.messages.at(-1)).toEqual(userMessage);
    const stored = await history.restore();
    expect(stored[4]).toEqual(userMessage);
    expect(agent.messages[4]).toEqual(userMessage);
    // The event says what the user typed.
    expect(eventsOf("ChatStarted").map((event) => event.text)).toEqual(["make a cake", "what next?"]);
  });
});
