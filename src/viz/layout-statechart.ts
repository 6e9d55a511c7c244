import {
  directRoute,
  LABEL_HEIGHT,
  LOOP_REACH,
  LOOP_SPACING,
  loopRoute,
  PortAllocator,
} from "./edge-routes.js";
import { type LayeredEdge, type LayeredNode, layeredLayout, type Point } from "./layered-layout.js";
import type { GraphState, GraphTransition, MachineGraph } from "./machine-graph.js";
import { SMALL_FONT, TITLE_FONT, textWidth } from "./text-width.js";

/**
 * Places a statechart: every compound state is laid out on its own (its children as a layered
 * graph, sized bottom-up so a child's box already holds its own children), then the levels are
 * stacked into absolute coordinates and the edges get their end points on the real boxes.
 *
 * Transitions are drawn at the level of the deepest state containing both ends: lifted to the
 * two children of that state they join, they take part in its ranking and ordering. Self
 * transitions become loops on the box's right side; a transition between a state and its own
 * descendant, or across parallel regions, is drawn directly.
 */

const LINE_HEIGHT = 15;
const PAD_X = 12;
const PAD = 16;
const HEADER = 26;
const ATOMIC_MIN_WIDTH = 84;
const ATOMIC_MIN_HEIGHT = 34;
const FINAL_INSET = 4;
const REGION_GAP = 16;
const DOT_SIZE = 10;

export interface Rect {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A text line drawn inside a state's box under its title. */
export interface BoxLine {
  text: string;
  kind: "invoke" | "internal";
}

export interface StateBox extends Rect {
  state: GraphState;
  depth: number;
  lines: BoxLine[];
  /** Height of the title band (and its lines) of a compound / parallel state. */
  headerHeight: number;
  /** A region of a parallel state (drawn dashed). */
  isRegion: boolean;
}

export interface EdgeLabel extends Rect {
  text: string;
}

export interface EdgeRoute {
  transition: GraphTransition;
  target: string;
  /**
   * `layered`: points from source to target, every tangent vertical; `loop`: the four points of
   * one cubic Bézier; `direct`: two end points.
   */
  shape: "layered" | "loop" | "direct";
  points: Point[];
  label?: EdgeLabel;
}

export interface InitialMarker {
  /** The compound state whose initial child this marks. */
  container: string;
  dot: Point;
  /** From the dot to the initial child's top. */
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

interface Placement {
  kind: "layered" | "loop" | "direct";
  transition: GraphTransition;
  target: string;
  /** Layered: the two children of `container` the edge joins. */
  container?: string;
  from?: string;
  to?: string;
}

interface LocalLayout {
  state: GraphState;
  width: number;
  height: number;
  /** Box width; `width` also counts the loops' reach and labels on the right. */
  boxWidth: number;
  headerHeight: number;
  lines: BoxLine[];
  children: Array<{ local: LocalLayout; x: number; y: number }>;
  /** Layered edges of this level: bend points relative to this box. */
  routes: Array<{ placement: Placement; points: Point[]; reversed: boolean; label?: Point }>;
  initial?: { dot: Point; points: Point[] };
}

const INITIAL_ID = "\u0000initial";

/** Computes the drawing's geometry from the graph model. */
export function layoutStatechart(graph: MachineGraph): StatechartLayout {
  const byId = new Map<string, GraphState>();
  const parentOf = new Map<string, GraphState>();
  const walk = (state: GraphState): void => {
    byId.set(state.id, state);
    for (const child of state.children) {
      parentOf.set(child.id, state);
      walk(child);
    }
  };
  walk(graph.root);

  const placements = graph.transitions.flatMap((transition) =>
    transition.targets
      .filter((target) => byId.has(target))
      .map((target) => place(transition, target, parentOf)),
  );
  const internal = new Map<string, BoxLine[]>();
  const loops = new Map<string, Placement[]>();
  for (const transition of graph.transitions) {
    if (transition.targets.length > 0) continue;
    const lines = internal.get(transition.source) ?? [];
    lines.push({ text: transition.label, kind: "internal" });
    internal.set(transition.source, lines);
  }
  for (const placement of placements) {
    if (placement.kind !== "loop") continue;
    loops.set(placement.transition.source, [...(loops.get(placement.transition.source) ?? []), placement]);
  }

  const measure = (state: GraphState): LocalLayout => {
    const lines: BoxLine[] = [
      ...state.invokes.map((invoke) => ({ text: `invoke ${invoke.src}`, kind: "invoke" as const })),
      ...(internal.get(state.id) ?? []),
    ];
    const linesWidth = Math.max(0, ...lines.map((line) => textWidth(line.text, SMALL_FONT)));
    const titleWidth = textWidth(state.key, TITLE_FONT, true);
    const ownLoops = loops.get(state.id) ?? [];
    const loopWidth =
      ownLoops.length === 0
        ? 0
        : LOOP_REACH + 6 + Math.max(...ownLoops.map((loop) => textWidth(loop.transition.label, SMALL_FONT)));
    const loopHeight = ownLoops.length === 0 ? 0 : 14 + ownLoops.length * LOOP_SPACING;
    const inset = state.type === "final" ? FINAL_INSET : 0;

    if (state.children.length === 0) {
      const boxWidth = Math.max(ATOMIC_MIN_WIDTH, titleWidth + 2 * PAD_X, linesWidth + 2 * PAD_X) + 2 * inset;
      const textHeight = lines.length === 0 ? ATOMIC_MIN_HEIGHT : 28 + lines.length * LINE_HEIGHT;
      const height = Math.max(textHeight + 2 * inset, loopHeight);
      return {
        state,
        width: boxWidth + loopWidth,
        height,
        boxWidth,
        headerHeight: height,
        lines,
        children: [],
        routes: [],
      };
    }

    const headerHeight = HEADER + lines.length * LINE_HEIGHT + (lines.length > 0 ? 4 : 0);
    const content =
      state.type === "parallel" ? measureRegions(state, measure) : measureLevel(state, measure, placements);
    const boxWidth = Math.max(titleWidth + 2 * PAD_X, linesWidth + 2 * PAD_X, content.width + 2 * PAD);
    const height = Math.max(headerHeight + content.height + PAD, loopHeight);
    const offsetX = (boxWidth - content.width) / 2;
    const shift = (point: Point): Point => ({ x: point.x + offsetX, y: point.y + headerHeight });
    const local: LocalLayout = {
      state,
      width: boxWidth + loopWidth,
      height,
      boxWidth,
      headerHeight,
      lines,
      children: content.children.map((child) => ({
        local: child.local,
        x: child.x + offsetX,
        y: child.y + headerHeight,
      })),
      routes: content.routes.map((route) => {
        const shifted = { ...route, points: route.points.map(shift) };
        if (route.label) shifted.label = shift(route.label);
        return shifted;
      }),
    };
    if (content.initial) {
      local.initial = { dot: shift(content.initial.dot), points: content.initial.points.map(shift) };
    }
    return local;
  };

  const root = measure(graph.root);
  const boxes: StateBox[] = [];
  const bends: Array<{ placement: Placement; points: Point[]; reversed: boolean; label?: Point }> = [];
  const initials: Array<{ container: string; dot: Point; bends: Point[]; target: string }> = [];
  const margin = 8;
  const stack = (local: LocalLayout, x: number, y: number, depth: number, isRegion: boolean): void => {
    boxes.push({
      state: local.state,
      depth,
      isRegion,
      lines: local.lines,
      headerHeight: local.headerHeight,
      x,
      y,
      width: local.boxWidth,
      height: local.height,
    });
    const move = (point: Point): Point => ({ x: point.x + x, y: point.y + y });
    for (const route of local.routes) {
      const moved = { ...route, points: route.points.map(move) };
      if (route.label) moved.label = move(route.label);
      bends.push(moved);
    }
    if (local.initial && local.state.initial) {
      initials.push({
        container: local.state.id,
        dot: move(local.initial.dot),
        bends: local.initial.points.map(move),
        target: local.state.initial,
      });
    }
    const isParallel = local.state.type === "parallel";
    for (const child of local.children) stack(child.local, x + child.x, y + child.y, depth + 1, isParallel);
  };
  stack(root, margin, margin, 0, false);

  const boxOf = new Map(boxes.map((box) => [box.state.id, box]));
  // Ports first: where an edge meets a box depends on all the edges meeting that side.
  const ports = new PortAllocator(boxOf);
  const requested = bends.map((route) => ({
    route,
    start: ports.request(
      route.placement.transition.source,
      route.reversed ? "top" : "bottom",
      route.points[0]!.x,
    ),
    end: ports.request(route.placement.target, route.reversed ? "bottom" : "top", route.points.at(-1)!.x),
  }));
  const requestedInitials = initials.map((initial) => ({
    initial,
    end: ports.request(initial.target, "top", (initial.bends.at(-1) ?? initial.dot).x),
  }));
  ports.assign();

  const edges: EdgeRoute[] = requested.map(({ route, start, end }) => {
    const { transition, target } = route.placement;
    const edge: EdgeRoute = {
      transition,
      target,
      shape: "layered",
      points: [ports.get(start), ...route.points, ports.get(end)],
    };
    if (route.label) {
      edge.label = {
        text: transition.label,
        x: route.label.x,
        y: route.label.y,
        width: textWidth(transition.label, SMALL_FONT),
        height: LABEL_HEIGHT,
      };
    }
    return edge;
  });
  const markers: InitialMarker[] = requestedInitials.map(({ initial, end }) => ({
    container: initial.container,
    dot: initial.dot,
    points: [{ x: initial.dot.x, y: initial.dot.y + DOT_SIZE / 2 }, ...initial.bends, ports.get(end)],
  }));

  for (const placement of placements) {
    const { transition } = placement;
    if (placement.kind === "loop") {
      const index = (loops.get(transition.source) ?? []).indexOf(placement);
      edges.push(loopRoute(transition, boxOf.get(transition.source)!, index));
    }
    if (placement.kind === "direct") {
      edges.push(
        directRoute(
          transition,
          placement.target,
          boxOf.get(transition.source)!,
          boxOf.get(placement.target)!,
        ),
      );
    }
  }

  return {
    width: Math.ceil(root.width + 2 * margin),
    height: Math.ceil(root.height + 2 * margin),
    boxes,
    edges,
    initials: markers,
  };
}

/** Decides at which level, and how, one transition to one target is drawn. */
function place(transition: GraphTransition, target: string, parentOf: Map<string, GraphState>): Placement {
  const source = transition.source;
  if (source === target) return { kind: "loop", transition, target };
  const ancestors = (id: string): string[] => {
    const chain: string[] = [];
    for (let parent = parentOf.get(id); parent; parent = parentOf.get(parent.id)) chain.push(parent.id);
    return chain;
  };
  const sourceAncestors = ancestors(source);
  const targetAncestors = new Set(ancestors(target));
  const container = sourceAncestors.find((id) => targetAncestors.has(id));
  if (container === undefined) return { kind: "direct", transition, target };
  const childOf = (id: string): string => {
    let current = id;
    while (parentOf.get(current)?.id !== container) current = parentOf.get(current)!.id;
    return current;
  };
  const from = childOf(source);
  const to = childOf(target);
  if (from === to || parentOf.get(from)!.type === "parallel") return { kind: "direct", transition, target };
  return { kind: "layered", transition, target, container, from, to };
}

interface LevelContent {
  width: number;
  height: number;
  children: Array<{ local: LocalLayout; x: number; y: number }>;
  routes: LocalLayout["routes"];
  initial?: { dot: Point; points: Point[] };
}

/** One compound level: its children (and the initial marker) as a layered graph. */
function measureLevel(
  state: GraphState,
  measure: (state: GraphState) => LocalLayout,
  placements: readonly Placement[],
): LevelContent {
  const locals = new Map(state.children.map((child) => [child.id, measure(child)]));
  const nodes: LayeredNode[] = [];
  const edges: LayeredEdge[] = [];
  const ours = placements.filter(
    (placement) => placement.kind === "layered" && placement.container === state.id,
  );
  const connected = new Set([state.initial, ...ours.flatMap((placement) => [placement.from, placement.to])]);
  // Unconnected children (typically reached only "from anywhere", e.g. a shutdown target) go
  // first in the top row, so the arrow coming in from the container's left wall crosses nothing.
  for (const [id, local] of locals) {
    if (!connected.has(id)) nodes.push({ id, width: local.width, height: local.height });
  }
  if (state.initial) {
    nodes.push({ id: INITIAL_ID, width: DOT_SIZE, height: DOT_SIZE });
    edges.push({ id: INITIAL_ID, source: INITIAL_ID, target: state.initial });
  }
  for (const [id, local] of locals) {
    if (connected.has(id)) nodes.push({ id, width: local.width, height: local.height });
  }
  ours.forEach((placement, index) => {
    edges.push({
      id: `e${index}`,
      source: placement.from!,
      target: placement.to!,
      label: { width: textWidth(placement.transition.label, SMALL_FONT), height: LABEL_HEIGHT },
    });
  });
  const result = layeredLayout(nodes, edges, { start: state.initial ? INITIAL_ID : state.children[0]?.id });
  const content: LevelContent = {
    width: result.width,
    height: result.height,
    children: [...locals].map(([id, local]) => {
      const placed = result.nodes.get(id)!;
      return { local, x: placed.x, y: placed.y };
    }),
    routes: ours.map((placement, index) => {
      const routed = result.edges.get(`e${index}`)!;
      const route: LocalLayout["routes"][number] = {
        placement,
        points: routed.points,
        reversed: routed.reversed,
      };
      if (routed.label) route.label = routed.label;
      return route;
    }),
  };
  const dot = result.nodes.get(INITIAL_ID);
  if (dot) {
    content.initial = {
      dot: { x: dot.x + DOT_SIZE / 2, y: dot.y + DOT_SIZE / 2 },
      points: result.edges.get(INITIAL_ID)?.points ?? [],
    };
  }
  return content;
}

/** A parallel state: its regions side by side, tops aligned. */
function measureRegions(state: GraphState, measure: (state: GraphState) => LocalLayout): LevelContent {
  let x = 0;
  let height = 0;
  const children = state.children.map((child) => {
    const local = measure(child);
    const placed = { local, x, y: 0 };
    x += local.width + REGION_GAP;
    height = Math.max(height, local.height);
    return placed;
  });
  return { width: Math.max(0, x - REGION_GAP), height, children, routes: [] };
}
