import { describe, expect, it } from "vitest";
import { and, not, or, setup } from "xstate";
import { allStates, describeGuard, machineGraph } from "../../src/viz/machine-graph.js";
import { loopLikeMachine, parallelMachine } from "./test-machines.js";

describe("machineGraph", () => {
  const graph = machineGraph(loopLikeMachine);

  it("lists every state with its nesting, type and initial child", () => {
    expect(allStates(graph).map((state) => `${state.id}:${state.type}`)).toEqual([
      "loop:compound",
      "loop.preparing:atomic",
      "loop.iterating:compound",
      "loop.iterating.turn:atomic",
      "loop.iterating.finalTurn:atomic",
      "loop.measuring:atomic",
      "loop.compacting:atomic",
      "loop.appending:atomic",
      "loop.done:final",
      "loop.failed:final",
      "loop.cancelled:final",
    ]);
    expect(graph.root.initial).toBe("loop.preparing");
    const iterating = graph.root.children.find((state) => state.key === "iterating")!;
    expect(iterating.initial).toBe("loop.iterating.turn");
    expect(iterating.path).toEqual(["iterating"]);
    expect(iterating.children.map((child) => child.path)).toEqual([
      ["iterating", "turn"],
      ["iterating", "finalTurn"],
    ]);
  });

  it("names invoked actors by their setup name", () => {
    const invokes = Object.fromEntries(allStates(graph).map((state) => [state.id, state.invokes]));
    expect(invokes["loop.iterating.turn"]).toEqual([{ id: "iteration", src: "runIteration" }]);
    expect(invokes["loop.compacting"]).toEqual([{ id: "compaction", src: "compact" }]);
    expect(invokes["loop.appending"]?.map((invoke) => invoke.src)).toEqual(["appendHistory"]);
    expect(invokes["loop.preparing"]).toEqual([]);
  });

  it("labels events, actor done/error, always with guards and after delays", () => {
    const shown = graph.transitions.map(
      (transition) =>
        `${transition.source} -[${transition.label}]-> ${transition.targets.join(",") || "(none)"}`,
    );
    expect(shown).toEqual([
      "loop.preparing -[START]-> loop.iterating",
      "loop.preparing -[after prepareTimeout]-> loop.failed",
      "loop.iterating -[STOP]-> loop.cancelled",
      "loop.iterating -[PING]-> (none)",
      "loop.iterating.turn -[done: runIteration [hasAnswer]]-> loop.measuring",
      "loop.iterating.turn -[done: runIteration [isNextFinal]]-> loop.iterating.finalTurn",
      "loop.iterating.turn -[done: runIteration]-> loop.iterating.turn",
      "loop.iterating.turn -[error]-> loop.failed",
      "loop.iterating.finalTurn -[done: runIteration]-> loop.measuring",
      "loop.iterating.finalTurn -[error]-> loop.failed",
      "loop.measuring -[always [!shouldCompact]]-> loop.appending",
      "loop.measuring -[always]-> loop.compacting",
      "loop.compacting -[done: compact]-> loop.appending",
      "loop.compacting -[error]-> loop.appending",
      "loop.appending -[done: appendHistory]-> loop.done",
      "loop.appending -[error]-> loop.failed",
      "loop.appending -[after 250ms]-> loop.appending",
    ]);
  });

  it("keeps the structured parts of each transition", () => {
    const byLabel = (source: string, label: string) =>
      graph.transitions.find((transition) => transition.source === source && transition.label === label)!;
    expect(byLabel("loop.preparing", "after prepareTimeout")).toMatchObject({
      kind: "after",
      delay: "prepareTimeout",
    });
    expect(byLabel("loop.appending", "after 250ms")).toMatchObject({
      kind: "after",
      delay: "250",
      reenter: true,
    });
    expect(byLabel("loop.iterating.turn", "done: runIteration [hasAnswer]")).toMatchObject({
      kind: "actorDone",
      actor: "runIteration",
      guard: "hasAnswer",
      eventType: "xstate.done.actor.iteration",
    });
    expect(byLabel("loop.compacting", "error")).toMatchObject({ kind: "actorError", actor: "compact" });
    expect(byLabel("loop.measuring", "always")).toMatchObject({ kind: "always", eventType: "" });
    expect(new Set(graph.transitions.map((transition) => transition.id)).size).toBe(graph.transitions.length);
  });

  it("uses the given name as the id prefix", () => {
    const renamed = machineGraph(loopLikeMachine, { name: "chat" });
    expect(renamed.name).toBe("chat");
    expect(renamed.machineId).toBe("loop");
    expect(renamed.root.id).toBe("chat");
    expect(renamed.transitions[0]).toMatchObject({ source: "chat.preparing", targets: ["chat.iterating"] });
  });

  it("describes parallel states, their regions and compound done events", () => {
    const parallel = machineGraph(parallelMachine);
    expect(parallel.root.type).toBe("parallel");
    expect(parallel.root.initial).toBeUndefined();
    expect(parallel.root.children.map((region) => `${region.id}:${region.type}:${region.initial}`)).toEqual([
      "player.audio:compound:player.audio.muted",
      "player.video:compound:player.video.paused",
    ]);
    const withDone = setup({}).createMachine({
      initial: "a",
      states: { a: { initial: "x", states: { x: { type: "final" } }, onDone: "b" }, b: {} },
    });
    const doneGraph = machineGraph(withDone);
    expect(doneGraph.name).toBe("machine");
    expect(doneGraph.transitions).toEqual([
      expect.objectContaining({
        source: "machine.a",
        targets: ["machine.b"],
        kind: "stateDone",
        label: "done",
      }),
    ]);
  });
});

describe("describeGuard", () => {
  it("spells out named guards and and / or / not combinators", () => {
    expect(describeGuard(undefined)).toBeUndefined();
    expect(describeGuard("isReady")).toBe("isReady");
    expect(describeGuard({ type: "isAbove", params: { limit: 3 } })).toBe("isAbove");
    expect(describeGuard(not("isLast"))).toBe("!isLast");
    expect(describeGuard(and(["a", not("b")]))).toBe("a && !b");
    expect(describeGuard(or(["a", and(["b", "c"])]))).toBe("a || (b && c)");
    expect(
      describeGuard(function hasRoom() {
        return true;
      }),
    ).toBe("hasRoom");
  });
});
