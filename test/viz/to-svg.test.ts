import { describe, expect, it } from "vitest";
import { setup } from "xstate";
import { allStates, machineGraph } from "../../src/viz/machine-graph.js";
import { renderMachine } from "../../src/viz/render-machine.js";
import { toSvg } from "../../src/viz/to-svg.js";
import { loopLikeMachine, parallelMachine } from "./test-machines.js";
import { checkWellFormed } from "./xml-check.js";

function stateIdsIn(svg: string): string[] {
  return [...svg.matchAll(/<g class="al-state[^"]*" data-state-id="([^"]+)"/g)].map((match) => match[1]!);
}

function rectOf(svg: string, id: string): { x: number; y: number; width: number; height: number } {
  const group = new RegExp(
    `data-state-id="${id.replace(/\./g, "\\.")}"[^>]*><rect class="al-box" x="([\\d.]+)" y="([\\d.]+)" width="([\\d.]+)" height="([\\d.]+)"`,
  ).exec(svg);
  if (!group) throw new Error(`no box for ${id}`);
  return { x: Number(group[1]), y: Number(group[2]), width: Number(group[3]), height: Number(group[4]) };
}

describe("toSvg", () => {
  const graph = machineGraph(loopLikeMachine, { name: "chat" });
  const svg = toSvg(graph);

  it("is a well-formed, self-contained SVG document", () => {
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith("</svg>")).toBe(true);
    expect(checkWellFormed(svg)).toEqual([]);
    expect(svg).not.toMatch(/(?:href|src)="(?:https?:)?\/\//);
    expect(svg).toMatch(/viewBox="0 0 \d+ \d+"/);
  });

  it("draws one element per state, carrying data-state-id = <machine>.<path>", () => {
    const ids = stateIdsIn(svg);
    expect(ids.sort()).toEqual(
      allStates(graph)
        .map((state) => state.id)
        .sort(),
    );
    expect(ids).toContain("chat.iterating.finalTurn");
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("draws final states double-bordered and marks each initial state", () => {
    for (const id of ["chat.done", "chat.failed", "chat.cancelled"]) {
      expect(svg).toMatch(
        new RegExp(
          `data-state-id="${id.replace(".", "\\.")}" data-state-type="final"><rect class="al-box"[^>]*/><rect class="al-box-inner"`,
        ),
      );
    }
    expect(svg.match(/class="al-initial"/g)).toHaveLength(2);
    expect(svg).toContain('data-initial-of="chat"');
    expect(svg).toContain('data-initial-of="chat.iterating"');
  });

  it("draws every transition with a target as a labelled arrow, targetless ones inside their state", () => {
    const edges = [...svg.matchAll(/<g class="al-edge [^"]*" data-transition-id="([^"]+)"/g)].map(
      (match) => match[1],
    );
    const targeted = graph.transitions.filter((transition) => transition.targets.length > 0);
    expect(edges).toHaveLength(targeted.length);
    expect(svg).toContain(">done: runIteration [hasAnswer]</text>");
    expect(svg).toContain(">always [!shouldCompact]</text>");
    expect(svg).toContain(">after 250ms</text>");
    expect(svg.match(/marker-end="url\(#al-chat-arrow\)"/g)!.length).toBe(targeted.length + 2);
    // PING has no target: a line inside the iterating box.
    expect(svg).toMatch(/<text class="al-line al-line-internal"[^>]*>PING<\/text>/);
    expect(svg).toMatch(/<text class="al-line al-line-invoke"[^>]*>invoke compact<\/text>/);
  });

  it("nests children inside their compound state's box", () => {
    const iterating = rectOf(svg, "chat.iterating");
    for (const child of ["chat.iterating.turn", "chat.iterating.finalTurn"]) {
      const box = rectOf(svg, child);
      expect(box.x).toBeGreaterThan(iterating.x);
      expect(box.y).toBeGreaterThan(iterating.y);
      expect(box.x + box.width).toBeLessThan(iterating.x + iterating.width);
      expect(box.y + box.height).toBeLessThan(iterating.y + iterating.height);
    }
    // Layered top to bottom from the initial state.
    expect(rectOf(svg, "chat.preparing").y).toBeLessThan(rectOf(svg, "chat.iterating").y);
    expect(rectOf(svg, "chat.measuring").y).toBeLessThan(rectOf(svg, "chat.appending").y);
  });

  it("draws parallel regions side by side, dashed", () => {
    const parallel = renderMachine(parallelMachine, "svg");
    expect(checkWellFormed(parallel)).toEqual([]);
    const audio = rectOf(parallel, "player.audio");
    const video = rectOf(parallel, "player.video");
    expect(audio.x + audio.width).toBeLessThan(video.x);
    expect(audio.y).toBe(video.y);
    expect(parallel).toMatch(/data-state-id="player\.audio"[^>]*><rect class="al-box"[^>]*stroke-dasharray/);
  });

  it("escapes names and labels", () => {
    const odd = setup({}).createMachine({
      id: "odd",
      initial: "a&b",
      states: { "a&b": { on: { 'say "<hi>"': "c'd" } }, "c'd": { type: "final" } },
    });
    const text = renderMachine(odd, "svg");
    expect(checkWellFormed(text)).toEqual([]);
    expect(text).toContain('data-state-id="odd.a&amp;b"');
    expect(text).toContain(">say &quot;&lt;hi&gt;&quot;</text>");
  });

  it("is deterministic", () => {
    expect(renderMachine(loopLikeMachine, "svg", { name: "chat" })).toBe(svg);
  });
});
