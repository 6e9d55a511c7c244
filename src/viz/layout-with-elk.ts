import type { ELK, ElkExtendedEdge, ElkNode, LayoutOptions } from "elkjs";
import { findBackEdges } from "./back-edges.js";
import type { GraphState, GraphTransition, MachineGraph } from "./machine-graph.js";
import { SMALL_FONT, SMALL_LINE, TITLE_FONT, textWidth } from "./text-width.js";

/**
 * Places a statechart with ELK (the Eclipse Layout Kernel, as elkjs): one layered layout, top to
 * bottom, of the whole state tree at once (compound states are ELK's compound nodes, so a
 * transition may cross their borders), with orthogonal edges and the transition labels placed by
 * ELK on their edges. We only size the boxes (from estimated text widths) and turn ELK's
 * parent-relative coordinates into absolute ones.
 *
 * Every coordinate is rounded to 0.1 px: ELK is deterministic for the same input, and the rounding
 * keeps the drawing byte-stable.
 *
 * @see https://eclipse.dev/elk/reference/algorithms/org-eclipse-elk-layered.html
 */

export interface Point {
  x: number;
  y: number;
}

export interface Rect extends Point {
  width: number;
  height: number;
}

/** A line of text at its baseline point; `anchor` as SVG's `text-anchor`. */
export interface PlacedText extends Point {
  text: string;
  anchor: "start" | "middle";
}

/** A line drawn inside a state's box under its name. */
export interface BoxLine extends PlacedText {
  kind: "invoke" | "internal";
}

export interface StateBox extends Rect {
  state: GraphState;
  /** 0 for the machine's root state. */
  depth: number;
  title: PlacedText;
  lines: BoxLine[];
  /** A region of a parallel state (drawn dashed). */
  isRegion: boolean;
}

export interface EdgeLabel extends Rect {
  lines: PlacedText[];
}

export interface EdgeRoute {
  transition: GraphTransition;
  target: string;
  /** From the source's border to the target's border; every segment horizontal or vertical. */
  points: Point[];
  label: EdgeLabel;
}

export interface InitialMarker {
  /** The compound state whose initial child this marks. */
  container: string;
  target: string;
  /** Centre of the dot. */
  dot: Point;
  /** From the dot to the initial child. */
  points: Point[];
}

export interface StatechartLayout {
  width: number;
  height: number;
  /** Parents before children. */
  boxes: StateBox[];
  edges: EdgeRoute[];
  initials: InitialMarker[];
}

/** Radius of the initial state's dot. */
export const DOT_RADIUS = 5;
/** Inset of a final state's inner border. */
export const FINAL_INSET = 4;

const MARGIN = 8;
const PAD_X = 14;
const ATOMIC_MIN_WIDTH = 80;
const ATOMIC_HEIGHT = 40;

// Set on every compound node: ELK reads spacing for a compound node's children from that node.
// (The model-order options, `considerModelOrder.*`, throw inside elkjs 0.12 with INCLUDE_CHILDREN;
// back-edges.ts gives the flow its direction instead.)
const LAYOUT_OPTIONS: LayoutOptions = {
  "elk.algorithm": "layered",
  "elk.direction": "DOWN",
  "elk.hierarchyHandling": "INCLUDE_CHILDREN",
  "elk.edgeRouting": "ORTHOGONAL",
  // Brandes–Köpf (the default) spreads a chart with many long edges much wider.
  "elk.layered.nodePlacement.strategy": "NETWORK_SIMPLEX",
  "elk.layered.compaction.postCompaction.strategy": "EDGE_LENGTH",
  // Tighter than ELK's defaults: the UI fits the whole chart into its pane.
  "elk.spacing.nodeNode": "6",
  "elk.layered.spacing.nodeNodeBetweenLayers": "12",
  "elk.spacing.edgeNode": "6",
  "elk.spacing.edgeEdge": "4",
  "elk.layered.spacing.edgeNodeBetweenLayers": "8",
  "elk.layered.spacing.edgeEdgeBetweenLayers": "6",
  "elk.spacing.edgeLabel": "3",
};

// On each label: the edge runs through its label (drawn with a halo), which keeps the chart narrow.
const LABEL_OPTIONS: LayoutOptions = { "elk.edgeLabels.inline": "true" };

/** The lines of a transition label: the guard goes on a line of its own. */
export function labelLines(label: string): string[] {
  const guard = label.indexOf(" [");
  return guard < 0 ? [label] : [label.slice(0, guard), label.slice(guard + 1)];
}

type LineOf = (state: GraphState) => Array<{ text: string; kind: BoxLine["kind"] }>;

interface Link {
  transition: GraphTransition;
  source: string;
  target: string;
}

/** The ELK input built from the graph model, with what is needed to read ELK's answer back. */
interface ElkInput {
  canvas: ElkNode;
  /** ELK ids are ours (`s<n>`, `i<n>`, `e<n>`): state keys may hold any character. */
  stateOf: Map<string, GraphState>;
  initials: Array<{ elkId: string; container: GraphState; target: string }>;
  links: Link[];
  /** Indexes of the links laid out reversed (back edges), so the layers follow the flow. */
  reversed: ReadonlySet<number>;
  linesOf: LineOf;
}

/** Computes the drawing's geometry from the graph model. */
export async function layoutWithElk(graph: MachineGraph): Promise<StatechartLayout> {
  const input = toElkInput(graph);
  const result = await (await elk()).layout(input.canvas);
  const { origins, boxes, dots } = placeNodes(result, input);
  const pointsOf = edgePoints(origins);
  const routed = new Map((result.edges ?? []).map((edge) => [edge.id, edge]));
  return {
    width: Math.ceil(result.width ?? 0),
    height: Math.ceil(result.height ?? 0),
    boxes,
    edges: input.links.map((link, index) =>
      edgeRoute(link, routed.get(`e${index}`)!, input.reversed.has(index), pointsOf),
    ),
    initials: input.initials.map((initial) => ({
      container: initial.container.id,
      target: initial.target,
      dot: dots.get(initial.elkId)!,
      points: pointsOf(routed.get(`${initial.elkId}e`)!).points,
    })),
  };
}

/** The lines a state box lists under its name: its invocations, then its targetless transitions. */
function boxLines(graph: MachineGraph): LineOf {
  const internal = new Map<string, string[]>();
  for (const transition of graph.transitions) {
    if (transition.targets.length > 0) continue;
    internal.set(transition.source, [...(internal.get(transition.source) ?? []), transition.label]);
  }
  return (state) => [
    ...state.invokes.map((invoke) => ({ text: `invoke ${invoke.src}`, kind: "invoke" as const })),
    ...(internal.get(state.id) ?? []).map((text) => ({ text, kind: "internal" as const })),
  ];
}

function toElkInput(graph: MachineGraph): ElkInput {
  const linesOf = boxLines(graph);
  const elkIdOf = new Map<string, string>();
  const stateOf = new Map<string, GraphState>();
  const initials: ElkInput["initials"] = [];

  const toElk = (state: GraphState): ElkNode => {
    const id = `s${elkIdOf.size}`;
    elkIdOf.set(state.id, id);
    stateOf.set(id, state);
    const lines = linesOf(state);
    const linesWidth = Math.max(0, ...lines.map((line) => textWidth(line.text, SMALL_FONT)));
    const titleWidth = textWidth(state.key, TITLE_FONT, true);
    if (state.children.length === 0) {
      const inset = state.type === "final" ? 2 * FINAL_INSET : 0;
      return {
        id,
        width: Math.max(ATOMIC_MIN_WIDTH, titleWidth + 2 * PAD_X, linesWidth + 2 * PAD_X) + inset,
        height: (lines.length === 0 ? ATOMIC_HEIGHT : 32 + lines.length * SMALL_LINE) + inset,
      };
    }
    const children = state.children.map(toElk);
    if (state.initial !== undefined) {
      const dot = `i${initials.length}`;
      initials.push({ elkId: dot, container: state, target: state.initial });
      // First in model order, so it starts the first layer.
      children.unshift({ id: dot, width: 2 * DOT_RADIUS, height: 2 * DOT_RADIUS });
    }
    const header = compoundHeader(lines.length);
    const minimumWidth = Math.max(titleWidth, linesWidth) + 2 * PAD_X;
    return {
      id,
      children,
      layoutOptions: {
        ...LAYOUT_OPTIONS,
        "elk.padding": `[top=${header},left=${PAD_X},bottom=${PAD_X},right=${PAD_X}]`,
        "elk.nodeSize.constraints": "MINIMUM_SIZE",
        // Height first: with INCLUDE_CHILDREN and direction DOWN, elkjs 0.12 applies a compound
        // node's minimum size transposed (it lays out left to right and rotates).
        "elk.nodeSize.minimum": `(${header + PAD_X}, ${minimumWidth})`,
      },
    };
  };
  const rootNode = toElk(graph.root);

  const edges: ElkExtendedEdge[] = initials.map((initial) => ({
    id: `${initial.elkId}e`,
    sources: [initial.elkId],
    targets: [elkIdOf.get(initial.target)!],
  }));
  const links: Link[] = graph.transitions.flatMap((transition) =>
    transition.targets
      .filter((target) => elkIdOf.has(target))
      .map((target) => ({ transition, source: transition.source, target })),
  );
  const reversed = findBackEdges(graph.root, links);
  links.forEach((link, index) => {
    const lines = labelLines(link.transition.label);
    const source = elkIdOf.get(link.source)!;
    const target = elkIdOf.get(link.target)!;
    edges.push({
      id: `e${index}`,
      sources: [reversed.has(index) ? target : source],
      targets: [reversed.has(index) ? source : target],
      labels: [
        {
          text: link.transition.label,
          width: Math.max(...lines.map((line) => textWidth(line, SMALL_FONT))),
          height: lines.length * SMALL_LINE,
          layoutOptions: LABEL_OPTIONS,
        },
      ],
    });
  });

  const canvas: ElkNode = {
    id: "canvas",
    layoutOptions: {
      ...LAYOUT_OPTIONS,
      "elk.padding": `[top=${MARGIN},left=${MARGIN},bottom=${MARGIN},right=${MARGIN}]`,
    },
    children: [rootNode],
    edges,
  };
  return { canvas, stateOf, initials, links, reversed, linesOf };
}

/** Absolute positions: ELK gives nodes relative to their parent, edges relative to their container. */
function placeNodes(
  result: ElkNode,
  { stateOf, linesOf }: ElkInput,
): { origins: Map<string, Point>; boxes: StateBox[]; dots: Map<string, Point> } {
  const origins = new Map<string, Point>();
  const boxes: StateBox[] = [];
  const dots = new Map<string, Point>();
  const place = (node: ElkNode, parent: Point, depth: number, isRegion: boolean): void => {
    const origin = { x: parent.x + (node.x ?? 0), y: parent.y + (node.y ?? 0) };
    origins.set(node.id, origin);
    const state = stateOf.get(node.id);
    if (state !== undefined) {
      boxes.push(
        stateBox(state, depth, isRegion, linesOf(state), {
          ...origin,
          width: node.width!,
          height: node.height!,
        }),
      );
    } else if (node.id.startsWith("i")) {
      dots.set(node.id, { x: origin.x + DOT_RADIUS, y: origin.y + DOT_RADIUS });
    }
    for (const child of node.children ?? []) {
      place(child, origin, state === undefined ? depth : depth + 1, state?.type === "parallel");
    }
  };
  place(result, { x: 0, y: 0 }, -1, false);
  return { origins, boxes, dots };
}

type PointsOf = (edge: ElkExtendedEdge) => { points: Point[]; origin: Point };

/** An edge's route in absolute coordinates (repeated points dropped), and its container's origin. */
function edgePoints(origins: ReadonlyMap<string, Point>): PointsOf {
  return (edge) => {
    const container = (edge as { container?: string }).container;
    const origin = (container === undefined ? undefined : origins.get(container)) ?? { x: 0, y: 0 };
    const points: Point[] = [];
    for (const section of edge.sections ?? []) {
      for (const point of [section.startPoint, ...(section.bendPoints ?? []), section.endPoint]) {
        const moved = { x: round(point.x + origin.x), y: round(point.y + origin.y) };
        const last = points.at(-1);
        if (last === undefined || last.x !== moved.x || last.y !== moved.y) points.push(moved);
      }
    }
    return { points, origin };
  };
}

/** A transition's drawn route and its label, pointing the way the transition goes. */
function edgeRoute(link: Link, edge: ElkExtendedEdge, isReversed: boolean, pointsOf: PointsOf): EdgeRoute {
  const { points, origin } = pointsOf(edge);
  if (isReversed) points.reverse();
  const placed = edge.labels?.[0];
  const lines = labelLines(link.transition.label);
  const box = {
    x: round((placed?.x ?? 0) + origin.x),
    y: round((placed?.y ?? 0) + origin.y),
    width: placed?.width ?? 0,
    height: placed?.height ?? 0,
  };
  return {
    transition: link.transition,
    target: link.target,
    points,
    label: {
      ...box,
      lines: lines.map((text, line) => ({
        text,
        anchor: "middle" as const,
        x: round(box.x + box.width / 2),
        y: round(box.y + line * SMALL_LINE + SMALL_FONT - 0.5),
      })),
    },
  };
}

/** Height of a compound state's band above its children: its name, then its lines. */
function compoundHeader(lineCount: number): number {
  return 30 + lineCount * SMALL_LINE + (lineCount > 0 ? 4 : 0);
}

function stateBox(
  state: GraphState,
  depth: number,
  isRegion: boolean,
  lines: Array<{ text: string; kind: BoxLine["kind"] }>,
  rect: Rect,
): StateBox {
  const box = { x: round(rect.x), y: round(rect.y), width: round(rect.width), height: round(rect.height) };
  if (state.children.length > 0) {
    const x = box.x + 12;
    return {
      ...box,
      state,
      depth,
      isRegion,
      title: { text: state.key, anchor: "start", x, y: box.y + 22 },
      lines: lines.map((line, index) => ({
        ...line,
        anchor: "start",
        x,
        y: box.y + 38 + index * SMALL_LINE,
      })),
    };
  }
  const x = round(box.x + box.width / 2);
  const titleY = lines.length === 0 ? round(box.y + box.height / 2 + 5.5) : box.y + 23;
  return {
    ...box,
    state,
    depth,
    isRegion,
    title: { text: state.key, anchor: "middle", x, y: titleY },
    lines: lines.map((line, index) => ({ ...line, anchor: "middle", x, y: box.y + 40 + index * SMALL_LINE })),
  };
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

let instance: Promise<ELK> | undefined;

/**
 * One ELK for the process, loaded on first use: its 1.6 MB of compiled Java is only parsed by the
 * commands that draw.
 */
function elk(): Promise<ELK> {
  instance ??= import("elkjs").then((module) => {
    // elkjs is CommonJS with `module.exports = ELK` and `ELK.default = ELK`; under NodeNext the
    // types see the import's `default` as the module, so reach the constructor through it.
    const ElkConstructor = module.default.default;
    return new ElkConstructor();
  });
  return instance;
}
