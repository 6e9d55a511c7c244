import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ChatCancelledError } from "../../src/agent/chat-errors.js";
import { defineTool } from "../../src/tools/define-tool.js";
import {
  createControlledTool,
  createTempHistories,
  createTestAgent,
  settle,
  waitUntil,
} from "../support/agent-harness.js";

/**
 * Tool calls that need approval wait in the iteration's awaitingApproval state; a
 * person's decision comes out of band; the pending approval is persisted with the session, so a
 * new agent on the same history (a restarted host) can take the decision and finish the chat.
 */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

function deployTool() {
  const runs: string[] = [];
  const tool = defineTool({
    name: "deploy",
    description: "Deploys.",
    parameters: z.object({ env: z.string() }),
    needsApproval: ({ env }) => env === "prod",
    execute: ({ env }) => {
      runs.push(env);
      return `deployed to ${env}`;
    },
  });
  return { tool, runs };
}

const prodCall = { id: "call-prod", name: "deploy", arguments: { env: "prod" } };
const stagingCall = { id: "call-staging", name: "deploy", arguments: { env: "staging" } };

describe("tool approval", () => {
  it("holds the calls until approved, announces the exact arguments, then runs them once", async () => {
    const deploy = deployTool();
    const { agent, eventsOf, backend } = await createTestAgent({
      script: [{ toolCalls: [stagingCall, prodCall] }, { text: "both deployed" }],
      tools: [deploy.tool],
      history: histories.open("bot", "s1"),
    });
    const chat = agent.chat("deploy everywhere");
    await waitUntil(() => eventsOf("ToolApprovalRequested").length === 1);
    expect(eventsOf("ToolApprovalRequested")[0]).toMatchObject({
      toolName: "deploy",
      toolCallId: "call-prod",
      arguments: '{"env":"prod"}',
    });
    // Nothing of the batch runs before the decision.
    expect(deploy.runs).toEqual([]);
    expect(agent.hasPendingApproval).toBe(true);
    expect(await histories.open("bot", "s1").loadPendingApproval()).toMatchObject({
      calls: [{ toolCallId: "call-prod", arguments: '{"env":"prod"}' }],
    });

    expect(await agent.decideToolCall!({ toolCallId: "call-staging", approved: true })).toMatchObject({
      ok: false,
    });
    expect(
      await agent.decideToolCall!({ toolCallId: "call-prod", approved: true, arguments: '{"env":"dev"}' }),
    ).toMatchObject({ ok: false });
    expect(await agent.decideToolCall!({ toolCallId: "call-prod", approved: true })).toEqual({ ok: true });
    expect(await agent.decideToolCall!({ toolCallId: "call-prod", approved: true })).toMatchObject({
      ok: false,
    });
    expect((await chat).result).toBe("both deployed");
    expect(deploy.runs.sort()).toEqual(["prod", "staging"]);
    expect(eventsOf("ToolApprovalResolved")).toMatchObject([{ toolCallId: "call-prod", approved: true }]);
    expect(agent.hasPendingApproval).toBe(false);
    expect(await histories.open("bot", "s1").loadPendingApproval()).toBeUndefined();
    expect(backend.requests).toHaveLength(2);
  });

  it("in a batch of two held calls, deciding one decides only that one, once", async () => {
    const deploy = deployTool();
    const { agent, eventsOf, backend } = await createTestAgent({
      script: [{ toolCalls: [stagingCall, prodCall] }, { text: "staging only" }],
      tools: [deploy.tool],
      history: histories.open("bot", "s1"),
      options: { needsApproval: ["deploy"] },
    });
    const chat = agent.chat("deploy everywhere");
    await waitUntil(() => eventsOf("ToolApprovalRequested").length === 2);

    expect(await agent.decideToolCall!({ toolCallId: "call-staging", approved: true })).toEqual({ ok: true });
    for (let tick = 0; tick < 20; tick++) await settle();
    // The other call is still held, undecided, and nothing of the batch ran.
    expect(deploy.runs).toEqual([]);
    expect(agent.hasPendingApproval).toBe(true);
    expect(eventsOf("ToolApprovalResolved")).toMatchObject([{ toolCallId: "call-staging", approved: true }]);
    const stored = await histories.open("bot", "s1").loadPendingApproval();
    expect(stored?.calls.map((call) => [call.toolCallId, call.decision?.approved])).toEqual([
      ["call-staging", true],
      ["call-prod", undefined],
    ]);

    // A second decision about the decided call is refused and changes nothing.
    const again = await agent.decideToolCall!({ toolCallId: "call-staging", approved: false });
    expect(again).toEqual({
      ok: false,
      message: 'tool call "call-staging" is not waiting for approval (unknown, or already decided)',
    });
    for (let tick = 0; tick < 20; tick++) await settle();
    expect(deploy.runs).toEqual([]);
    expect(eventsOf("ToolApprovalResolved")).toHaveLength(1);

    expect(
      await agent.decideToolCall!({ toolCallId: "call-prod", approved: false, reason: "frozen" }),
    ).toEqual({
      ok: true,
    });
    expect((await chat).result).toBe("staging only");
    expect(deploy.runs).toEqual(["staging"]);
    expect(eventsOf("ToolApprovalResolved")).toMatchObject([
      { toolCallId: "call-staging", approved: true },
      { toolCallId: "call-prod", approved: false },
    ]);
    expect(backend.requests[1]?.messages.slice(-2)).toEqual([
      { role: "tool", toolCallId: "call-staging", toolName: "deploy", content: "deployed to staging" },
      {
        role: "tool",
        toolCallId: "call-prod",
        toolName: "deploy",
        content: JSON.stringify({ error: "denied", reason: "frozen" }),
      },
    ]);
  });

  it("an approval another host already took is refused: the call does not run twice", async () => {
    const before = await createTestAgent({
      script: [{ toolCalls: [prodCall] }],
      tools: [deployTool().tool],
      history: histories.open("bot", "s1"),
      name: "bot",
    });
    const chat = before.agent.chat("deploy to prod");
    await waitUntil(() => before.eventsOf("ToolApprovalRequested").length === 1);
    const parking = before.agent.parkPendingApproval!();
    await expect(chat).rejects.toBeInstanceOf(ChatCancelledError);
    expect(await parking).toBe(true);

    // Two hosts load the same parked approval; a person's decision reaches each of them.
    const first = deployTool();
    const one = await createTestAgent({
      script: [{ text: "deployed" }],
      tools: [first.tool],
      history: histories.open("bot", "s1"),
      name: "bot",
    });
    const second = deployTool();
    const other = await createTestAgent({
      script: [{ text: "deployed again" }],
      tools: [second.tool],
      history: histories.open("bot", "s1"),
      name: "bot",
    });
    expect(one.agent.hasPendingApproval).toBe(true);
    expect(other.agent.hasPendingApproval).toBe(true);

    expect(await one.agent.decideToolCall!({ toolCallId: "call-prod", approved: true })).toEqual({
      ok: true,
    });
    await waitUntil(() => one.eventsOf("ChatCompleted").length === 1);
    expect(first.runs).toEqual(["prod"]);

    expect(await other.agent.decideToolCall!({ toolCallId: "call-prod", approved: true })).toEqual({
      ok: false,
      message: 'the approval of "call-prod" was already used',
    });
    for (let tick = 0; tick < 20; tick++) await settle();
    expect(second.runs).toEqual([]);
    expect(other.backend.requests).toHaveLength(0);
    expect(other.eventsOf("ChatCompleted")).toEqual([]);
    // The history holds the one run's result, written by the host that took the approval.
    const stored = await histories.open("bot", "s1").restore();
    expect(stored.filter((message) => message.role === "tool")).toEqual([
      { role: "tool", toolCallId: "call-prod", toolName: "deploy", content: "deployed to prod" },
    ]);
    expect(stored.at(-1)).toMatchObject({ role: "assistant", content: "deployed" });
  });

  it("a denial reaches the model as the call's result, with the reason; the call never runs", async () => {
    const deploy = deployTool();
    const { agent, eventsOf, backend } = await createTestAgent({
      script: [{ toolCalls: [prodCall] }, { text: "not deployed" }],
      tools: [deploy.tool],
    });
    const chat = agent.chat("deploy to prod");
    await waitUntil(() => eventsOf("ToolApprovalRequested").length === 1);
    expect(
      await agent.decideToolCall!({ toolCallId: "call-prod", approved: false, reason: "frozen" }),
    ).toEqual({ ok: true });
    expect((await chat).result).toBe("not deployed");
    expect(deploy.runs).toEqual([]);
    expect(backend.requests[1]?.messages.at(-1)).toEqual({
      role: "tool",
      toolCallId: "call-prod",
      toolName: "deploy",
      content: JSON.stringify({ error: "denied", reason: "frozen" }),
    });
  });

  it("the agent's needsApproval list holds every call of the named tools", async () => {
    const deploy = deployTool();
    const { agent, eventsOf } = await createTestAgent({
      script: [{ toolCalls: [stagingCall] }, { text: "ok" }],
      tools: [deploy.tool],
      options: { needsApproval: ["deploy"] },
    });
    const chat = agent.chat("deploy to staging");
    await waitUntil(() => eventsOf("ToolApprovalRequested").length === 1);
    expect(deploy.runs).toEqual([]);
    await agent.decideToolCall!({ toolCallId: "call-staging", approved: true });
    expect((await chat).result).toBe("ok");
    expect(deploy.runs).toEqual(["staging"]);
  });

  it("stop cancels the pending approval: the call gets a cancelled result and the record goes", async () => {
    const deploy = deployTool();
    const { agent, eventsOf } = await createTestAgent({
      script: [{ toolCalls: [prodCall] }],
      tools: [deploy.tool],
      history: histories.open("bot", "s1"),
    });
    const controller = new AbortController();
    const chat = agent.chat("deploy to prod", { signal: controller.signal });
    await waitUntil(() => eventsOf("ToolApprovalRequested").length === 1);
    controller.abort();
    await expect(chat).rejects.toBeInstanceOf(ChatCancelledError);
    expect(await histories.open("bot", "s1").loadPendingApproval()).toBeUndefined();
    expect(agent.hasPendingApproval).toBe(false);
    expect(await histories.open("bot", "s1").restore()).toEqual([
      { role: "user", content: "deploy to prod" },
      { role: "assistant", content: "", toolCalls: [{ ...prodCall, arguments: '{"env":"prod"}' }] },
      { role: "tool", toolCallId: "call-prod", toolName: "deploy", content: '{"error":"cancelled"}' },
    ]);
    expect(await agent.decideToolCall!({ toolCallId: "call-prod", approved: true })).toMatchObject({
      ok: false,
    });
    expect(deploy.runs).toEqual([]);
  });

  it("survives the agent: a new agent on the same history takes the approval and finishes the chat", async () => {
    const first = deployTool();
    const before = await createTestAgent({
      script: [{ toolCalls: [stagingCall, prodCall] }],
      tools: [first.tool],
      history: histories.open("bot", "s1"),
      name: "bot",
    });
    const chat = before.agent.chat("deploy everywhere");
    await waitUntil(() => before.eventsOf("ToolApprovalRequested").length === 1);
    // The host shuts down: the chat is parked, its requester answered `cancelled`.
    const parking = before.agent.parkPendingApproval!();
    await expect(chat).rejects.toThrow(/approval stays pending/);
    expect(await parking).toBe(true);
    const chatId = before.eventsOf("ToolApprovalRequested")[0]!.chatId;

    const second = deployTool();
    const after = await createTestAgent({
      script: [{ text: "both deployed" }],
      tools: [second.tool],
      history: histories.open("bot", "s1"),
      name: "bot",
    });
    expect(after.agent.hasPendingApproval).toBe(true);
    expect(await after.agent.decideToolCall!({ toolCallId: "call-prod", approved: true })).toEqual({
      ok: true,
    });
    await waitUntil(() => after.eventsOf("ChatCompleted").length === 1);
    expect(after.eventsOf("ChatCompleted")[0]).toMatchObject({ chatId, result: "both deployed" });
    expect([...first.runs, ...second.runs].sort()).toEqual(["prod", "staging"]);
    expect(second.runs.sort()).toEqual(["prod", "staging"]);
    expect(after.agent.hasPendingApproval).toBe(false);
    const stored = await histories.open("bot", "s1").restore();
    expect(stored.map((message) => message.role)).toEqual(["user", "assistant", "tool", "tool", "assistant"]);
    expect(after.agent.messages).toEqual(stored);
    expect(await histories.open("bot", "s1").loadPendingApproval()).toBeUndefined();
    // Used once.
    expect(await after.agent.decideToolCall!({ toolCallId: "call-prod", approved: true })).toMatchObject({
      ok: false,
    });
  });

  it("a chat parked by the previous version (its settings flat in the context) resumes after the upgrade", async () => {
    const first = deployTool();
    const before = await createTestAgent({
      script: [{ toolCalls: [prodCall] }],
      tools: [first.tool],
      history: histories.open("bot", "s9"),
      name: "bot",
    });
    const chat = before.agent.chat("deploy");
    await waitUntil(() => before.eventsOf("ToolApprovalRequested").length === 1);
    const parking = before.agent.parkPendingApproval!();
    await expect(chat).rejects.toThrow(/approval stays pending/);
    expect(await parking).toBe(true);
    // Rewrite the stored snapshot the way the previous version wrote it.
    const history = histories.open("bot", "s9");
    const pending = (await history.loadPendingApproval!())!;
    const { config, ...rest } = pending.snapshot.context as { config: Record<string, unknown> };
    expect(config.systemPrompt).toBeTypeOf("string");
    await history.takePendingApproval!();
    await history.savePendingApproval!({
      ...pending,
      snapshot: { ...pending.snapshot, context: { ...config, ...rest } },
    });

    const second = deployTool();
    const after = await createTestAgent({
      script: [{ text: "deployed" }],
      tools: [second.tool],
      history: histories.open("bot", "s9"),
      name: "bot",
    });
    expect(await after.agent.decideToolCall!({ toolCallId: "call-prod", approved: true })).toEqual({
      ok: true,
    });
    await waitUntil(() => after.eventsOf("ChatCompleted").length === 1);
    expect(after.eventsOf("ChatCompleted")[0]).toMatchObject({ result: "deployed" });
    expect(second.runs).toEqual(["prod"]);
  });

  it("after a restart, a new chat waits behind the parked one, which goes first once decided", async () => {
    const first = deployTool();
    const before = await createTestAgent({
      script: [{ toolCalls: [prodCall] }],
      tools: [first.tool],
      history: histories.open("bot", "s1"),
    });
    const chat = before.agent.chat("deploy to prod");
    await waitUntil(() => before.eventsOf("ToolApprovalRequested").length === 1);
    const parking = before.agent.parkPendingApproval!();
    await expect(chat).rejects.toBeInstanceOf(ChatCancelledError);
    expect(await parking).toBe(true);

    const second = deployTool();
    const after = await createTestAgent({
      script: [{ text: "denied, as you wish" }, { text: "hello again" }],
      tools: [second.tool],
      history: histories.open("bot", "s1"),
    });
    const next = after.agent.chat("hello");
    await waitUntil(() => after.agent.hasPendingApproval === true);
    expect(after.backend.requests).toHaveLength(0);
    expect(await after.agent.decideToolCall!({ toolCallId: "call-prod", approved: false })).toEqual({
      ok: true,
    });
    expect((await next).result).toBe("hello again");
    expect(second.runs).toEqual([]);
    expect((await histories.open("bot", "s1").restore()).map((message) => message.content)).toEqual([
      "deploy to prod",
      "",
      JSON.stringify({ error: "denied" }),
      "denied, as you wish",
      "hello",
      "hello again",
    ]);
  });

  it("/new cancels a parked approval before clearing the session", async () => {
    const deploy = deployTool();
    const before = await createTestAgent({
      script: [{ toolCalls: [prodCall] }],
      tools: [deploy.tool],
      history: histories.open("bot", "s1"),
    });
    const chat = before.agent.chat("deploy to prod");
    await waitUntil(() => before.eventsOf("ToolApprovalRequested").length === 1);
    const parking = before.agent.parkPendingApproval!();
    await expect(chat).rejects.toBeInstanceOf(ChatCancelledError);
    expect(await parking).toBe(true);
    const after = await createTestAgent({
      script: [],
      tools: [deploy.tool],
      history: histories.open("bot", "s1"),
    });
    await after.agent.reset();
    expect(after.agent.hasPendingApproval).toBe(false);
    expect(after.eventsOf("ChatFailed")).toMatchObject([{ cancelled: true }]);
    expect(await histories.open("bot", "s1").restore()).toEqual([]);
    expect(await histories.open("bot", "s1").loadPendingApproval()).toBeUndefined();
  });

  it("a shutdown cancels a resumed chat still running after its decision; it writes its history", async () => {
    const before = await createTestAgent({
      script: [{ toolCalls: [prodCall] }],
      tools: [deployTool().tool],
      history: histories.open("bot", "s1"),
    });
    const chat = before.agent.chat("deploy to prod");
    await waitUntil(() => before.eventsOf("ToolApprovalRequested").length === 1);
    const parking = before.agent.parkPendingApproval!();
    await expect(chat).rejects.toBeInstanceOf(ChatCancelledError);
    await parking;

    const slow = createControlledTool("deploy", z.object({ env: z.string() }));
    const after = await createTestAgent({
      script: [],
      tools: [slow.tool],
      history: histories.open("bot", "s1"),
    });
    await after.agent.decideToolCall!({ toolCallId: "call-prod", approved: true });
    await waitUntil(() => slow.calls.length === 1);
    expect(await after.agent.parkPendingApproval!()).toBe(false);
    expect(after.eventsOf("ChatFailed")).toMatchObject([{ cancelled: true }]);
    expect((await histories.open("bot", "s1").restore()).at(-1)).toEqual({
      role: "tool",
      toolCallId: "call-prod",
      toolName: "deploy",
      content: JSON.stringify({ error: "cancelled" }),
    });
  });
});
