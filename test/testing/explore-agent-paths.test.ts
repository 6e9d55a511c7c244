import { describe, expect, it } from "vitest";
import { chatMachine } from "../../machines/chat.machine.js";
import { compactionMachine } from "../../machines/compaction.machine.js";
import { iterationMachine } from "../../machines/iteration.machine.js";
import { createAgent } from "../../src/agent/create-agent.js";
import { InMemoryContextHistory } from "../../src/context/in-memory-history.js";
import {
  type AgentPath,
  builtinAgentPaths,
  definedStates,
  definedTransitions,
  exploreAgentPaths,
} from "../../src/testing/index.js";

const MACHINES = [chatMachine, iterationMachine, compactionMachine];
const ALL_STATES = MACHINES.flatMap(definedStates);
const ALL_TRANSITIONS = MACHINES.flatMap(definedTransitions);

describe("exploreAgentPaths", () => {
  it("walks every built-in path on real agents and measures the machines' definitions", async () => {
    const report = await exploreAgentPaths();

    expect(report.paths.map((path) => path.name)).toEqual(Object.keys(builtinAgentPaths()));
    expect(report.paths.filter((path) => !path.ok)).toEqual([]);
    expect(report.states.total).toBe(ALL_STATES.length);
    expect(report.transitions.total).toBe(ALL_TRANSITIONS.length);
    // Whatever was not covered is listed, nothing is dropped.
    expect(report.missing).toHaveLength(
      report.states.total - report.states.covered + report.transitions.total - report.transitions.covered,
    );
    for (const state of [
      "chat.iterating.toolTurn",
      "chat.iterating.finalTurn",
      "chat.cancelling",
      "chat.cancelled",
      "chat.compacting",
      "chat.recoveringContext",
      "chat.failed",
      "iteration.executingTools",
      "iteration.backfilling",
      "iteration.awaitingApproval",
      "compaction.compacted",
      "compaction.failed",
    ]) {
      expect(report.missing).not.toContain(`state ${state}`);
    }
    expect(report.missing).not.toContain("transition iteration.streaming --stream.reset--> #0");
    expect(report.missing).not.toContain("transition iteration.awaitingApproval --approval.granted--> #0");
    expect(report.missing).not.toContain("transition iteration.awaitingApproval --approval.denied--> #0");
    // A tool failure that ends the chat (the `fail` supervision policy) leaves executingTools at once.
    expect(report.missing).not.toContain("transition iteration.executingTools --xstate.done.actor.*--> #0");
    expect(report.states.covered).toBe(
      report.states.total - report.missing.filter((m) => m.startsWith("state ")).length,
    );
  });

  it("covers a path's own states only: a tool turn alone leaves cancel and compaction missing", async () => {
    const report = await exploreAgentPaths({ paths: ["toolTurn"] });

    expect(report.paths).toEqual([{ name: "toolTurn", ok: true }]);
    expect(report.missing).not.toContain("state iteration.executingTools");
    expect(report.missing).toContain("state chat.cancelling");
    expect(report.missing).toContain("state chat.compacting");
    expect(report.machines.chat?.states.missing).toContain("chat.cancelling");
  });

  it("builds agents with the caller's factory and runs the caller's own paths", async () => {
    const histories: InMemoryContextHistory[] = [];
    const broken: AgentPath = {
      name: "expectsTheWrongAnswer",
      prepare: () => ({
        script: [{ text: "actual" }],
        drive: async (agent) => {
          const { result } = await agent.chat("hi");
          if (result !== "expected") throw new Error(`got ${result}`);
        },
      }),
    };
    const report = await exploreAgentPaths({
      createAgent: (setup) => {
        const history = new InMemoryContextHistory();
        histories.push(history);
        return createAgent({ ...setup, model: "mine", history });
      },
      paths: ["finalTurn", broken],
    });

    expect(report.paths).toEqual([
      { name: "finalTurn", ok: true },
      { name: "expectsTheWrongAnswer", ok: false, error: "got actual" },
    ]);
    expect(histories).toHaveLength(2);
    expect((await histories[0]!.restore()).length).toBeGreaterThan(0);
  });

  it("walks the approval paths by name: held for approval, then granted or denied", async () => {
    const report = await exploreAgentPaths({ paths: ["approval", "approvalDenied"] });

    expect(report.paths).toEqual([
      { name: "approval", ok: true },
      { name: "approvalDenied", ok: true },
    ]);
    expect(report.machines.iteration?.states.missing).not.toContain("iteration.awaitingApproval");
    expect(report.missing).not.toContain("transition iteration.awaitingApproval --approval.granted--> #0");
    expect(report.missing).not.toContain("transition iteration.awaitingApproval --approval.denied--> #0");
  });

  it("walks childFailure by name: a call's fatal failure ends the iteration and the chat", async () => {
    const report = await exploreAgentPaths({ paths: ["childFailure"] });

    expect(report.paths).toEqual([{ name: "childFailure", ok: true }]);
    expect(report.missing).not.toContain("transition iteration.executingTools --xstate.done.actor.*--> #0");
    expect(report.missing).not.toContain("state iteration.failed");
    expect(report.missing).not.toContain("state chat.failed");
    // The batch never finished: nothing was back-filled as a whole.
    expect(report.missing).toContain("state iteration.backfilling");
  });

  it("rejects a path name it does not know, naming the ones it does", async () => {
    await expect(exploreAgentPaths({ paths: ["approve"] })).rejects.toThrow(
      /unknown path "approve" \(built in: toolTurn, finalTurn, .*approval, approvalDenied; pass an AgentPath/,
    );
  });
});
