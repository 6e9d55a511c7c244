import { describe, expect, it } from "vitest";
import { type AnyStateMachine, fromPromise, setup } from "xstate";
import { findBackEdges, type StateLink } from "../../src/viz/back-edges.js";
import { machineGraph } from "../../src/viz/machine-graph.js";

/** Shaped like the chat loop: decide → turn → back to decide, or out; recover → back in. */
const loop = setup({
  actors: { run: fromPromise(async () => "done") },
}).createMachine({
  id: "loop",
  initial: "preparing",
  states: {
    preparing: { always: "iterating" },
    iterating: {
      initial: "deciding",
      on: { SELF: ".deciding", STOP: "stopped" },
      states: {
        deciding: { always: "toolTurn" },
        toolTurn: {
          invoke: { src: "run", onDone: "deciding", onError: "#loop.recovering" },
          on: { AGAIN: "toolTurn" },
        },
      },
    },
    recovering: { on: { RETRY: "iterating", GIVE_UP: "stopped" } },
    stopped: { type: "final" },
  },
});

function linksOf(machine: AnyStateMachine): StateLink[] {
  const graph = machineGraph(machine);
  return graph.transitions.flatMap((transition) =>
    transition.targets.map((target) => ({ source: transition.source, target })),
  );
}

describe("findBackEdges", () => {
  const graph = machineGraph(loop);
  const links = linksOf(loop);
  const reversed = [...findBackEdges(graph.root, links)].map(
    (index) => `${links[index]!.source} -> ${links[index]!.target}`,
  );

  it("reverses the returns of each loop, seen from the initial state", () => {
    expect(reversed.sort()).toEqual([
      // Within iterating: deciding → toolTurn is the way in, toolTurn → deciding the way back.
      "loop.iterating.toolTurn -> loop.iterating.deciding",
      // At the top: iterating → recovering (lifted from toolTurn's error) is the way in.
      "loop.recovering -> loop.iterating",
    ]);
  });

  it("never reverses self links or links between a state and its own descendant", () => {
    expect(links).toContainEqual({ source: "loop.iterating.toolTurn", target: "loop.iterating.toolTurn" });
    expect(links).toContainEqual({ source: "loop.iterating", target: "loop.iterating.deciding" });
    expect(reversed).not.toContain("loop.iterating.toolTurn -> loop.iterating.toolTurn");
    expect(reversed).not.toContain("loop.iterating -> loop.iterating.deciding");
  });

  it("leaves an acyclic chart alone", () => {
    const chain = setup({}).createMachine({
      id: "chain",
      initial: "a",
      states: { a: { on: { GO: "b" } }, b: { on: { GO: "c", SKIP: "c" } }, c: { type: "final" } },
    });
    expect(findBackEdges(machineGraph(chain).root, linksOf(chain)).size).toBe(0);
  });
});
