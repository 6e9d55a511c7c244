import { describe, expect, it } from "vitest";
import { z } from "zod";
import { canCallTools } from "../../src/llm/types.js";
import type { ScriptedRequest } from "../../src/testing/index.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * The last iteration is a final turn: the model cannot call a tool, reasoningEffort
 * stays, and the turn is its own state in StateChanged.
 */

let executions = 0;
const lookup = defineTool({
  name: "lookup",
  description: "Looks something up.",
  parameters: z.object({ q: z.string() }),
  execute: ({ q }) => {
    executions += 1;
    return `found ${q}`;
  },
});

/** A model that calls a tool whenever it can, and answers in text only when it must. */
const keepsCallingTools = (request: ScriptedRequest, index: number) =>
  canCallTools(request.options)
    ? { toolCalls: [{ name: "lookup", arguments: { q: `q${index + 1}` } }] }
    : { text: "Forced to answer: here is what I found." };

describe("the final turn", () => {
  it("maxIterations = 3 with a model that always calls tools: request 3 has no callable tool and keeps reasoningEffort", async () => {
    executions = 0;
    const { agent, backend, eventsOf } = await createTestAgent({
      script: keepsCallingTools,
      tools: [lookup],
      options: { maxIterations: 3, reasoningEffort: "high" },
    });
    const { result } = await agent.chat("find things");

    expect(result).toBe("Forced to answer: here is what I found.");
    expect(backend.requests).toHaveLength(3);
    expect(executions).toBe(2);
    const [first, second, third] = backend.requests.map((request) => request.options);
    for (const options of [first, second]) {
      expect(options?.tools?.map((tool) => tool.name)).toEqual(["lookup"]);
      expect(options?.toolChoice).toBeUndefined();
      expect(options?.reasoningEffort).toBe("high");
    }
    // The history holds tool calls, so the definitions stay and tool_choice is "none" (Anthropic
    // rejects tool_use blocks in a request without tools); thinking stays on.
    expect(third).toMatchObject({ toolChoice: "none", reasoningEffort: "high" });
    expect(third?.tools?.map((tool) => tool.name)).toEqual(["lookup"]);
    expect(canCallTools(third!)).toBe(false);

    // The final turn is its own state, shown live.
    const chatStates = eventsOf("StateChanged")
      .filter((event) => event.machine === "chat")
      .map((event) => JSON.stringify(event.state));
    expect(chatStates.filter((state) => state === '{"iterating":"toolTurn"}')).toHaveLength(2);
    expect(chatStates.filter((state) => state === '{"iterating":"finalTurn"}')).toHaveLength(1);
    expect(chatStates.indexOf('{"iterating":"finalTurn"}')).toBeGreaterThan(
      chatStates.lastIndexOf('{"iterating":"toolTurn"}'),
    );
    expect(eventsOf("ModelRequest").map((event) => [event.iteration, event.final])).toEqual([
      [1, false],
      [2, false],
      [3, true],
    ]);
  });

  it("without tool traffic in the history the final request drops the tool definitions", async () => {
    const { agent, backend } = await createTestAgent({
      script: [{ text: "hello" }],
      tools: [lookup],
      options: { maxIterations: 1, reasoningEffort: "low" },
    });
    await agent.chat("hi");
    expect(backend.requests[0]?.options).toEqual({ model: "scripted-model", reasoningEffort: "low" });
  });

  it("an answer before the cap ends the loop with tools still offered", async () => {
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [{ toolCalls: [{ name: "lookup", arguments: { q: "x" } }] }, { text: "done" }],
      tools: [lookup],
      options: { maxIterations: 3 },
    });
    expect((await agent.chat("go")).result).toBe("done");
    expect(backend.requests.map((request) => canCallTools(request.options))).toEqual([true, true]);
    const states = eventsOf("StateChanged").map((event) => JSON.stringify(event.state));
    expect(states).not.toContain('{"iterating":"finalTurn"}');
  });

  it("a model that calls a tool on the final turn anyway gets no tool run and its text is the answer", async () => {
    // Regression pin: tool_choice "none" is a request, not a guarantee (OpenAI-compatible servers
    // may ignore it). On the last iteration "the model cannot call a tool".
    executions = 0;
    const { agent, backend } = await createTestAgent({
      script: () => ({ text: "Final words.", toolCalls: [{ name: "lookup", arguments: { q: "again" } }] }),
      tools: [lookup],
      options: { maxIterations: 2 },
    });
    const { result } = await agent.chat("go");
    expect(backend.requests).toHaveLength(2);
    expect(executions).toBe(1);
    expect(result).toBe("Final words.");
  });
});
