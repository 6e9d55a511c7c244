import { describe, expect, it } from "vitest";
import { z } from "zod";
import { uniqueToolCallIds } from "../../src/llm/unique-tool-call-ids.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent, danglingToolCalls, settle, waitUntil } from "../support/agent-harness.js";

/**
 * Regression: an OpenAI-compatible server sent two tool calls with the same id (`call_1`) in one
 * turn, and one approval of `call_1` let both run (the arguments were checked against the first).
 * The second call is renamed before anything runs, so each call has its own approval and result.
 */

function deployTool() {
  const runs: string[] = [];
  const tool = defineTool({
    name: "deploy",
    description: "Deploys.",
    parameters: z.object({ env: z.string() }),
    needsApproval: true,
    execute: ({ env }) => {
      runs.push(env);
      return `deployed to ${env}`;
    },
  });
  return { tool, runs };
}

describe("duplicate tool call ids in one model turn", () => {
  it("renames a repeated id, keeping the first and skipping ids the turn already uses", () => {
    const calls = [
      { id: "call_1", name: "a", arguments: "{}" },
      { id: "call_1_2", name: "b", arguments: "{}" },
      { id: "call_1", name: "c", arguments: "{}" },
      { id: "call_1", name: "d", arguments: "{}" },
    ];
    expect(uniqueToolCallIds(calls).map((call) => call.id)).toEqual([
      "call_1",
      "call_1_2",
      "call_1_3",
      "call_1_4",
    ]);
    const distinct = [{ id: "x", name: "a", arguments: "{}" }];
    expect(uniqueToolCallIds(distinct)).toBe(distinct);
  });

  it("asks for each call on its own: one approval runs exactly one call", async () => {
    const deploy = deployTool();
    const { agent, eventsOf } = await createTestAgent({
      script: [
        {
          toolCalls: [
            { id: "call_1", name: "deploy", arguments: { env: "staging" } },
            { id: "call_1", name: "deploy", arguments: { env: "prod" } },
          ],
        },
        { text: "done" },
      ],
      tools: [deploy.tool],
    });
    const chat = agent.chat("deploy");
    await waitUntil(() => eventsOf("ToolApprovalRequested").length === 2);
    expect(eventsOf("ToolApprovalRequested").map((event) => [event.toolCallId, event.arguments])).toEqual([
      ["call_1", '{"env":"staging"}'],
      ["call_1_2", '{"env":"prod"}'],
    ]);

    // The approval of the staging call is bound to it: the prod call does not ride on it.
    expect(
      await agent.decideToolCall!({ toolCallId: "call_1", approved: true, arguments: '{"env":"prod"}' }),
    ).toMatchObject({ ok: false });
    expect(await agent.decideToolCall!({ toolCallId: "call_1", approved: true })).toEqual({ ok: true });
    await settle();
    expect(deploy.runs).toEqual([]);
    expect(agent.hasPendingApproval).toBe(true);
    expect(
      await agent.decideToolCall!({ toolCallId: "call_1_2", approved: false, reason: "not prod" }),
    ).toEqual({ ok: true });

    expect((await chat).result).toBe("done");
    expect(deploy.runs).toEqual(["staging"]);
    const results = agent.messages.filter((message) => message.role === "tool");
    expect(results.map((message) => [message.toolCallId, message.content])).toEqual([
      ["call_1", "deployed to staging"],
      ["call_1_2", '{"error":"denied","reason":"not prod"}'],
    ]);
    const assistant = agent.messages.find((message) => message.toolCalls !== undefined);
    expect(assistant?.toolCalls?.map((call) => call.id)).toEqual(["call_1", "call_1_2"]);
    expect(danglingToolCalls(agent.messages)).toEqual([]);
    expect(eventsOf("ToolCallStarted").map((event) => event.toolCallId)).toEqual(["call_1"]);
  });
});
