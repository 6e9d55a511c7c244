import { beforeAll, describe, expect, it } from "vitest";
import { setup } from "xstate";
import { layoutWithElk, type Rect, type StatechartLayout } from "../../src/viz/layout-with-elk.js";
import { allStates, machineGraph } from "../../src/viz/machine-graph.js";
import { renderMachine } from "../../src/viz/render-machine.js";
import { drawStatechart } from "../../src/viz/to-svg.js";
import { loopLikeMachine, parallelMachine } from "./test-machines.js";
import { checkWellFormed } from "./xml-check.js";

function stateIdsIn(svg: string): string[] {
  return [...svg.matchAll(/<g class="al-state[^"]*" data-state-id="([^"]+)"/g)].map((match) => match[1]!);
}

function rectOf(svg: string, id: string): Rect {
  const group = new RegExp(
    `data-state-id="${id.replace(/\./g, "\\.")}"[^>]*><rect class="al-box" x="([\\d.]+)" y="([\\d.]+)" width="([\\d.]+)" height="([\\d.]+)"`,
  ).exec(svg);
  if (!group) throw new Error(`no box for ${id}`);
  return { x: Number(group[1]), y: Number(group[2]), width: Number(group[3]), height: Number(group[4]) };
}

/** The text of every transition label, its lines joined by a space. */
function labelsIn(svg: string): string[] {
  return [...svg.matchAll(/<text class="al-label">(.*?)<\/text>/g)].map((match) =>
    [...match[1]!.matchAll(/<tspan[^>]*>([^<]*)<\/tspan>/g)].map((line) => line[1]).join(" "),
  );
}

function isOnBorder(point: { x: number; y: number }, box: Rect): boolean {
  const tolerance = 0.6;
  const withinX = point.x >= box.x - tolerance && point.x <= box.x + box.width + tolerance;
  const withinY = point.y >= box.y - tolerance && point.y <= box.y + box.height + tolerance;
  const onVertical =
    Math.abs(point.x - box.x) <= tolerance || Math.abs(point.x - (box.x + box.width)) <= tolerance;
  const onHorizontal =
    Math.abs(point.y - box.y) <= tolerance || Math.abs(point.y - (box.y + box.height)) <= tolerance;
  return withinX && withinY && (onVertical || onHorizontal);
}

function overlaps(a: Rect, b: Rect): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

describe("toSvg (laid out by ELK)", () => {
  const graph = machineGraph(loopLikeMachine, { name: "chat" });
  let layout: StatechartLayout;
  let svg: string;

  beforeAll(async () => {
    layout = await layoutWithElk(graph);
    svg = drawStatechart(graph, layout);
  });

  it("is a well-formed, self-contained SVG document that scales to its container", () => {
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith("</svg>")).toBe(true);
    expect(checkWellFormed(svg)).toEqual([]);
    expect(svg).not.toMatch(/(?:href|src)="(?:https?:)?\/\//);
    expect(svg).toContain(`viewBox="0 0 ${layout.width} ${layout.height}"`);
    expect(svg).toContain('preserveAspectRatio="xMidYMid meet"');
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
    const boxes = new Map(layout.boxes.map((box) => [box.state.id, box]));
    for (const initial of layout.initials) {
      expect(isOnBorder(initial.points.at(-1)!, boxes.get(initial.target)!)).toBe(true);
    }
  });

  it("draws every transition with a target as a labelled arrow, targetless ones inside their state", () => {
    const edges = [...svg.matchAll(/<g class="al-edge [^"]*" data-transition-id="([^"]+)"/g)].map(
      (match) => match[1],
    );
    const targeted = graph.transitions.filter((transition) => transition.targets.length > 0);
    expect(edges.sort()).toEqual(targeted.map((transition) => transition.id).sort());
    // Every label, the guard on a line of its own.
    expect(labelsIn(svg).sort()).toEqual(targeted.map((transition) => transition.label).sort());
    expect(svg).toContain('<tspan x="');
    expect(svg).toMatch(/>done: runIteration<\/tspan><tspan [^>]*>\[hasAnswer\]<\/tspan>/);
    expect(svg.match(/marker-end="url\(#al-chat-arrow\)"/g)!.length).toBe(targeted.length + 2);
    // PING has no target: a line inside the iterating box.
    expect(svg).toMatch(/<text class="al-line al-line-internal"[^>]*>PING<\/text>/);
    expect(svg).toMatch(/<text class="al-line al-line-invoke"[^>]*>invoke compact<\/text>/);
  });

  it("routes every edge orthogonally from its source's border to its target's border", () => {
    const boxes = new Map(layout.boxes.map((box) => [box.state.id, box]));
    expect(layout.edges).toHaveLength(
      graph.transitions.filter((transition) => transition.targets.length > 0).length,
    );
    for (const edge of layout.edges) {
      const name = `${edge.transition.id} (${edge.transition.label})`;
      expect(edge.points.length, name).toBeGreaterThanOrEqual(2);
      for (let index = 1; index < edge.points.length; index++) {
        const [a, b] = [edge.points[index - 1]!, edge.points[index]!];
        expect(a.x === b.x || a.y === b.y, `${name}: segment ${index}`).toBe(true);
      }
      expect(isOnBorder(edge.points[0]!, boxes.get(edge.transition.source)!), `${name} starts`).toBe(true);
      expect(isOnBorder(edge.points.at(-1)!, boxes.get(edge.target)!), `${name} ends`).toBe(true);
    }
  });

  it("keeps labels off the states' boxes", () => {
    const atomic = layout.boxes.filter((box) => box.state.children.length === 0);
    for (const edge of layout.edges) {
      expect(edge.label.width, edge.transition.label).toBeGreaterThan(0);
      for (const box of atomic) {
        expect(overlaps(edge.label, box), `${edge.transition.label} on ${box.state.id}`).toBe(false);
      }
    }
  });

  it("nests children inside their compound state's box and flows down from the initial state", () => {
    const iterating = rectOf(svg, "chat.iterating");
    for (const child of ["chat.iterating.turn", "chat.iterating.finalTurn"]) {
      const box = rectOf(svg, child);
      expect(box.x).toBeGreaterThan(iterating.x);
      expect(box.y).toBeGreaterThan(iterating.y);
      expect(box.x + box.width).toBeLessThan(iterating.x + iterating.width);
      expect(box.y + box.height).toBeLessThan(iterating.y + iterating.height);
    }
    const root = rectOf(svg, "chat");
    expect(root.x + root.width).toBeLessThanOrEqual(layout.width);
    expect(root.y + root.height).toBeLessThanOrEqual(layout.height);
    expect(rectOf(svg, "chat.preparing").y).toBeLessThan(rectOf(svg, "chat.iterating").y);
    expect(rectOf(svg, "chat.measuring").y).toBeLessThan(rectOf(svg, "chat.appending").y);
    expect(rectOf(svg, "chat.appending").y).toBeLessThan(rectOf(svg, "chat.done").y);
  });

  it("widens a compound state to hold its name", async () => {
    const long = setup({}).createMachine({
      id: "long",
      initial: "aVeryVeryLongCompoundStateNameIndeed",
      states: { aVeryVeryLongCompoundStateNameIndeed: { initial: "q", states: { q: {} } } },
    });
    const drawn = await renderMachine(long, "svg");
    const box = rectOf(drawn, "long.aVeryVeryLongCompoundStateNameIndeed");
    expect(box.width).toBeGreaterThan(300);
    expect(box.height).toBeLessThan(120);
  });

  it("draws parallel regions side by side, dashed", async () => {
    const parallel = await renderMachine(parallelMachine, "svg");
    expect(checkWellFormed(parallel)).toEqual([]);
    const audio = rectOf(parallel, "player.audio");
    const video = rectOf(parallel, "player.video");
    expect(audio.x + audio.width).toBeLessThan(video.x);
    expect(parallel).toMatch(/data-state-id="player\.audio"[^>]*><rect class="al-box"[^>]*stroke-dasharray/);
    expect(parallel).toContain('<tspan class="al-kind"> (parallel)</tspan>');
  });

  it("escapes names and labels", async () => {
    const odd = setup({}).createMachine({
      id: "odd",
      initial: "a&b",
      states: { "a&b": { on: { 'say "<hi>"': "c'd" } }, "c'd": { type: "final" } },
    });
    const text = await renderMachine(odd, "svg");
    expect(checkWellFormed(text)).toEqual([]);
    expect(text).toContain('data-state-id="odd.a&amp;b"');
    expect(text).toContain(">say &quot;&lt;hi&gt;&quot;</tspan>");
  });

  it("is deterministic", async () => {
    expect(await renderMachine(loopLikeMachine, "svg", { name: "chat" })).toBe(svg);
  });
});
