import { describe, expect, it } from "vitest";
import { machineGraph } from "../../src/viz/machine-graph.js";
import { toJson } from "../../src/viz/to-json.js";
import { toMermaid } from "../../src/viz/to-mermaid.js";
import { loopLikeMachine, parallelMachine } from "./test-machines.js";

describe("toMermaid", () => {
  const text = toMermaid(machineGraph(loopLikeMachine));
  const lines = text.split("\n").map((line) => line.trim());

  it("writes a stateDiagram-v2 with every state, its label and initial / final markers", () => {
    expect(lines[0]).toBe("stateDiagram-v2");
    expect(lines).toContain('state "preparing" as preparing');
    expect(lines).toContain('state "finalTurn" as iterating_finalTurn');
    expect(lines).toContain("[*] --> preparing");
    expect(lines).toContain("[*] --> iterating_turn");
    expect(lines).toContain("done --> [*]");
    expect(lines).toContain("compacting : invoke compact");
    expect(lines).toContain("iterating : on PING");
  });

  it("writes transitions with labels, inside the state that contains both ends", () => {
    const block = text.slice(
      text.indexOf("state iterating {"),
      text.indexOf("}", text.indexOf("state iterating {")),
    );
    expect(block).toContain("iterating_turn --> iterating_finalTurn : done: runIteration [isNextFinal]");
    expect(block).not.toContain("--> measuring");
    expect(lines).toContain("iterating_turn --> measuring : done: runIteration [hasAnswer]");
    expect(lines).toContain("preparing --> failed : after prepareTimeout");
    expect(lines).toContain("measuring --> appending : always [!shouldCompact]");
    expect(lines).toContain("appending --> appending : after 250ms");
  });

  it("separates parallel regions with --", () => {
    const parallel = toMermaid(machineGraph(parallelMachine))
      .split("\n")
      .map((line) => line.trim());
    expect(parallel).toContain("state player {");
    const start = parallel.indexOf("state audio {");
    expect(start).toBeGreaterThan(parallel.indexOf("state player {"));
    expect(parallel.slice(start)).toContain("--");
    expect(parallel).toContain("video_running --> video_ended : END");
  });
});

describe("toJson", () => {
  it("is the graph model", () => {
    const graph = JSON.parse(toJson(machineGraph(loopLikeMachine, { name: "chat" })));
    expect(graph.name).toBe("chat");
    expect(graph.root.children.map((state: { key: string }) => state.key)).toContain("iterating");
    expect(graph.transitions.length).toBeGreaterThan(10);
  });
});
