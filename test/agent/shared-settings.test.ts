import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent, waitUntil } from "../support/agent-harness.js";

/**
 * Sessions of one agent share one resolved settings object (an idle session holds no copy of
 * them); sessions whose options differ in any value still each run with their own.
 */

const call = { id: "call-1", name: "deploy", arguments: {} };

function deployTool() {
  const runs: number[] = [];
  const tool = defineTool({
    name: "deploy",
    description: "Deploys.",
    parameters: z.object({}),
    execute: () => {
      runs.push(1);
      return "deployed";
    },
  });
  return { tool, runs };
}

describe("settings shared between sessions", () => {
  it("each session keeps its own system prompt and model options when another's differ", async () => {
    const sessions = [
      { systemPrompt: "You are A.", maxOutputTokens: 100 },
      { systemPrompt: "You are B.", maxOutputTokens: 100 },
      { systemPrompt: "You are A.", maxOutputTokens: 200 },
      { systemPrompt: "You are A.", maxOutputTokens: 100 },
    ];
    const seen: { system: unknown; maxTokens: unknown }[] = [];
    for (const [index, options] of sessions.entries()) {
      const { agent, backend } = await createTestAgent({
        script: [{ text: "ok" }],
        session: `s${index}`,
        options,
      });
      await agent.chat("hello");
      const request = backend.requests[0]!;
      seen.push({ system: request.messages[0]?.content, maxTokens: request.options.maxTokens });
    }
    expect(seen).toEqual([
      { system: "You are A.", maxTokens: 100 },
      { system: "You are B.", maxTokens: 100 },
      { system: "You are A.", maxTokens: 200 },
      { system: "You are A.", maxTokens: 100 },
    ]);
  });

  it("a session without an approval list runs a tool that another session's list holds", async () => {
    const held = deployTool();
    const holding = await createTestAgent({
      script: [{ toolCalls: [call] }, { text: "ok" }],
      tools: [held.tool],
      session: "held",
      options: { needsApproval: ["deploy"] },
    });
    const chat = holding.agent.chat("deploy");
    await waitUntil(() => holding.eventsOf("ToolApprovalRequested").length === 1);
    expect(held.runs).toEqual([]);

    const free = deployTool();
    const running = await createTestAgent({
      script: [{ toolCalls: [call] }, { text: "done" }],
      tools: [free.tool],
      session: "free",
    });
    expect((await running.agent.chat("deploy")).result).toBe("done");
    expect(free.runs).toEqual([1]);
    expect(running.eventsOf("ToolApprovalRequested")).toEqual([]);

    await holding.agent.decideToolCall!({ toolCallId: "call-1", approved: true });
    expect((await chat).result).toBe("ok");
    expect(held.runs).toEqual([1]);
  });
});
