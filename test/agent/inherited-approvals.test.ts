import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTempHistories, createTestAgent, waitUntil } from "../support/agent-harness.js";

/**
 * Approvals an asking agent requires (`ask_agent`'s `approvalRequired`) hold in the asked session
 * for its life: a chat parked awaiting approval and restored by another host keeps asking for them,
 * and the session passes them on when it asks further.
 */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

/** A tool that needs no approval of its own. */
function runTool() {
  const runs: string[] = [];
  const tool = defineTool({
    name: "run",
    description: "Runs a step.",
    parameters: z.object({ step: z.string() }),
    execute: ({ step }) => {
      runs.push(step);
      return `ran ${step}`;
    },
  });
  return { tool, runs };
}

const call = (step: string) => ({ id: `call-${step}`, name: "run", arguments: { step } });

/** A tool that notes the approvals its chain asks for (`seen`, one entry per call). */
function approvalsProbe() {
  const seen: (readonly string[] | undefined)[] = [];
  const probe = defineTool({
    name: "probe",
    description: "Reports the chain's approvals.",
    parameters: z.object({}),
    execute: (_args, context) => {
      seen.push(context.approvalRequired);
      return "ok";
    },
  });
  return { seen, probe };
}

describe("inherited approvals", () => {
  it("make calls to an approval-free tool wait; a parked chat restored elsewhere keeps them", async () => {
    const first = runTool();
    const before = await createTestAgent({
      script: [{ toolCalls: [call("a")] }],
      tools: [first.tool],
      history: histories.open("ops", "front-s1"),
      name: "ops",
    });
    before.agent.inheritApprovals!(["run"]);
    const chat = before.agent.chat("do a then b");
    await waitUntil(() => before.eventsOf("ToolApprovalRequested").length === 1);
    expect(first.runs).toEqual([]);
    const parking = before.agent.parkPendingApproval!();
    await expect(chat).rejects.toThrow(/approval stays pending/);
    expect(await parking).toBe(true);
    expect(await histories.open("ops", "front-s1").loadPendingApproval()).toMatchObject({
      approvalRequired: ["run"],
    });

    // Another host: nobody tells this session again what its caller required.
    const second = runTool();
    const after = await createTestAgent({
      script: [{ toolCalls: [call("b")] }, { text: "both ran" }],
      tools: [second.tool],
      history: histories.open("ops", "front-s1"),
      name: "ops",
    });
    expect(await after.agent.decideToolCall!({ toolCallId: "call-a", approved: true })).toEqual({ ok: true });
    await waitUntil(() => after.eventsOf("ToolApprovalRequested").length === 1);
    expect(after.eventsOf("ToolApprovalRequested")[0]).toMatchObject({ toolCallId: "call-b" });
    expect(second.runs).toEqual(["a"]);
    expect(await after.agent.decideToolCall!({ toolCallId: "call-b", approved: true })).toEqual({ ok: true });
    await waitUntil(() => after.eventsOf("ChatCompleted").length === 1);
    expect(second.runs).toEqual(["a", "b"]);
  });

  it("pass on to the agents the session asks: its own list, tools that may ask, and what it inherited", async () => {
    const { seen, probe } = approvalsProbe();
    const guarded = defineTool({
      name: "guarded",
      description: "Asks first.",
      parameters: z.object({}),
      needsApproval: () => false,
      execute: () => "ok",
    });
    const { agent } = await createTestAgent({
      script: [{ toolCalls: [{ id: "p1", name: "probe", arguments: {} }] }, { text: "done" }],
      tools: [probe, guarded],
      options: { needsApproval: ["deploy"] },
    });
    agent.inheritApprovals!(["shell"]);
    await agent.chat("probe");
    expect(seen).toEqual([["deploy", "guarded", "shell"]]);
  });

  it("pass on what the session inherited since its last chat", async () => {
    const { seen, probe } = approvalsProbe();
    const probeCall = (id: string) => ({ toolCalls: [{ id, name: "probe", arguments: {} }] });
    const { agent } = await createTestAgent({
      script: [probeCall("p1"), probeCall("p2"), { text: "first" }, probeCall("p3"), { text: "second" }],
      tools: [probe],
      options: { needsApproval: ["deploy"] },
    });
    await agent.chat("probe twice");
    agent.inheritApprovals!(["shell"]);
    await agent.chat("probe again");
    expect(seen).toEqual([["deploy"], ["deploy"], ["deploy", "shell"]]);
  });
});
