/**
 * A small layered (Sugiyama-style) layout for one level of a statechart, top to bottom:
 *
 * 1. break cycles: a depth-first search from the start node marks back edges, which are laid out
 *    reversed (and drawn pointing back up);
 * 2. rank by longest path, so every edge points strictly down;
 * 3. split each edge into one node per layer it crosses; layers are doubled so every edge gets a
 *    node between two state layers, and that node carries the edge's label (labels never overlap
 *    states or each other);
 * 4. order each layer by barycenter sweeps, keeping the order with the fewest crossings;
 * 5. place x by pulling each node towards its neighbours' mean, solved per layer as an isotonic
 *    regression so that order and spacing always hold.
 *
 * Pure and deterministic: the same input always gives the same drawing.
 */

export interface Point {
  x: number;
  y: number;
}

export interface LayeredNode {
  id: string;
  width: number;
  height: number;
}

export interface LayeredEdge {
  id: string;
  source: string;
  target: string;
  /** Size of the label to reserve beside the edge. */
  label?: { width: number; height: number };
}

export interface LayeredOptions {
  /** Where the depth-first search starts (the initial state or its marker). */
  start?: string;
  /** Horizontal gap between two real nodes. */
  nodeGap?: number;
  /** Horizontal gap next to an edge's bend point. */
  edgeGap?: number;
  /** Vertical gap between layers. */
  layerGap?: number;
}

export interface PlacedNode {
  /** Top-left corner. */
  x: number;
  y: number;
  rank: number;
}

export interface RoutedEdge {
  /** Bend points from the source side to the target side (the endpoints are not included). */
  points: Point[];
  /** Laid out upwards: leaves the source's top side and enters the target's bottom side. */
  reversed: boolean;
  /** Top-left corner of the label box. */
  label?: Point;
}

export interface LayeredResult {
  width: number;
  height: number;
  nodes: Map<string, PlacedNode>;
  edges: Map<string, RoutedEdge>;
}

interface Vertex {
  id: string;
  width: number;
  height: number;
  layer: number;
  /** Set on dummy vertices: the edge they belong to. */
  edge?: string;
  isLabel: boolean;
  /** Centre x. */
  x: number;
  /** Where edges attach, relative to `x` (a label vertex's line runs along its left side). */
  anchor: number;
}

interface Segment {
  upper: Vertex;
  lower: Vertex;
  weight: number;
}

const SWEEPS = 24;
const PLACEMENT_ROUNDS = 8;
const DUMMY_WIDTH = 8;
/** Where the line passes through a label vertex, from its left side; the text follows. */
export const LABEL_LINE_OFFSET = 3;
export const LABEL_TEXT_OFFSET = 8;

/** Lays out `nodes` and `edges`; self-loops must be handled by the caller. */
export function layeredLayout(
  nodes: readonly LayeredNode[],
  edges: readonly LayeredEdge[],
  options: LayeredOptions = {},
): LayeredResult {
  const nodeGap = options.nodeGap ?? 32;
  const edgeGap = options.edgeGap ?? 14;
  const layerGap = options.layerGap ?? 18;
  const usable = edges.filter((edge) => edge.source !== edge.target);

  const reversed = findBackEdges(nodes, usable, options.start);
  const ranks = rankNodes(nodes, usable, reversed);

  // Vertices: real nodes on even layers, one dummy per odd/even layer an edge crosses.
  const vertices = new Map<string, Vertex>();
  for (const node of nodes) {
    vertices.set(node.id, {
      id: node.id,
      width: node.width,
      height: node.height,
      layer: 2 * ranks.get(node.id)!,
      isLabel: false,
      x: 0,
      anchor: 0,
    });
  }
  const chains = new Map<string, Vertex[]>();
  const segments: Segment[] = [];
  for (const edge of usable) {
    const isReversed = reversed.has(edge.id);
    const upper = vertices.get(isReversed ? edge.target : edge.source)!;
    const lower = vertices.get(isReversed ? edge.source : edge.target)!;
    const chain: Vertex[] = [];
    // The label sits next to the edge's real source: downwards that is the first bend.
    const labelLayer = isReversed ? lower.layer - 1 : upper.layer + 1;
    for (let layer = upper.layer + 1; layer < lower.layer; layer++) {
      const isLabel = edge.label !== undefined && layer === labelLayer;
      const width = isLabel ? edge.label!.width + LABEL_TEXT_OFFSET + 2 : DUMMY_WIDTH;
      const dummy: Vertex = {
        id: `${edge.id}@${layer}`,
        width,
        height: isLabel ? edge.label!.height : 0,
        layer,
        edge: edge.id,
        isLabel,
        x: 0,
        anchor: isLabel ? LABEL_LINE_OFFSET - width / 2 : 0,
      };
      vertices.set(dummy.id, dummy);
      chain.push(dummy);
    }
    const path = [upper, ...chain, lower];
    for (let index = 0; index + 1 < path.length; index++) {
      const a = path[index]!;
      const b = path[index + 1]!;
      // Long edges weigh more so that they run straight instead of zig-zagging.
      const weight = a.edge !== undefined && b.edge !== undefined ? 8 : a.edge || b.edge ? 2 : 1;
      segments.push({ upper: a, lower: b, weight });
    }
    chains.set(edge.id, chain);
  }

  const layers = buildLayers(vertices);
  orderLayers(layers, segments);
  placeHorizontally(layers, segments, nodeGap, edgeGap);
  const { height, centers } = placeVertically(layers, layerGap);

  let minLeft = Number.POSITIVE_INFINITY;
  let maxRight = Number.NEGATIVE_INFINITY;
  for (const vertex of vertices.values()) {
    minLeft = Math.min(minLeft, vertex.x - vertex.width / 2);
    maxRight = Math.max(maxRight, vertex.x + vertex.width / 2);
  }
  if (!Number.isFinite(minLeft)) return { width: 0, height: 0, nodes: new Map(), edges: new Map() };

  const placed = new Map<string, PlacedNode>();
  for (const node of nodes) {
    const vertex = vertices.get(node.id)!;
    placed.set(node.id, {
      x: vertex.x - vertex.width / 2 - minLeft,
      y: centers[vertex.layer]! - vertex.height / 2,
      rank: ranks.get(node.id)!,
    });
  }
  const routed = new Map<string, RoutedEdge>();
  for (const edge of usable) {
    const chain = chains.get(edge.id)!;
    const isReversed = reversed.has(edge.id);
    let label: Point | undefined;
    const points = chain.map((vertex) => {
      const left = vertex.x - vertex.width / 2 - minLeft;
      const y = centers[vertex.layer]!;
      if (vertex.isLabel) {
        label = { x: left + LABEL_TEXT_OFFSET, y: y - vertex.height / 2 };
        return { x: left + LABEL_LINE_OFFSET, y };
      }
      return { x: vertex.x - minLeft, y };
    });
    if (isReversed) points.reverse();
    routed.set(edge.id, label ? { points, reversed: isReversed, label } : { points, reversed: isReversed });
  }
  return { width: maxRight - minLeft, height, nodes: placed, edges: routed };
}

/** Depth-first from `start`, then from every unvisited node in order; returns the back edges' ids. */
function findBackEdges(
  nodes: readonly LayeredNode[],
  edges: readonly LayeredEdge[],
  start: string | undefined,
): Set<string> {
  const outgoing = new Map<string, LayeredEdge[]>();
  for (const edge of edges) {
    const list = outgoing.get(edge.source) ?? [];
    list.push(edge);
    outgoing.set(edge.source, list);
  }
  const state = new Map<string, "active" | "done">();
  const back = new Set<string>();
  const visit = (id: string): void => {
    state.set(id, "active");
    for (const edge of outgoing.get(id) ?? []) {
      const seen = state.get(edge.target);
      if (seen === "active") back.add(edge.id);
      else if (seen === undefined) visit(edge.target);
    }
    state.set(id, "done");
  };
  const order = nodes.map((node) => node.id);
  if (start !== undefined && order.includes(start)) visit(start);
  for (const id of order) if (!state.has(id)) visit(id);
  return back;
}

/** Longest-path ranks over the edges with back edges reversed; lone sources move next to their successors. */
function rankNodes(
  nodes: readonly LayeredNode[],
  edges: readonly LayeredEdge[],
  reversed: Set<string>,
): Map<string, number> {
  const successors = new Map<string, string[]>();
  const indegree = new Map<string, number>();
  for (const node of nodes) {
    successors.set(node.id, []);
    indegree.set(node.id, 0);
  }
  for (const edge of edges) {
    const [from, to] = reversed.has(edge.id) ? [edge.target, edge.source] : [edge.source, edge.target];
    successors.get(from)!.push(to);
    indegree.set(to, indegree.get(to)! + 1);
  }
  const ranks = new Map<string, number>();
  const queue = nodes.map((node) => node.id).filter((id) => indegree.get(id) === 0);
  for (const id of queue) ranks.set(id, 0);
  const remaining = new Map(indegree);
  for (let index = 0; index < queue.length; index++) {
    const id = queue[index]!;
    for (const next of successors.get(id)!) {
      ranks.set(next, Math.max(ranks.get(next) ?? 0, ranks.get(id)! + 1));
      remaining.set(next, remaining.get(next)! - 1);
      if (remaining.get(next) === 0) queue.push(next);
    }
  }
  // A source that is not the start would sit in the top row, far from where it leads.
  for (const node of nodes) {
    const next = successors.get(node.id)!;
    if (indegree.get(node.id) === 0 && next.length > 0 && ranks.get(node.id) === 0) {
      const closest = Math.min(...next.map((id) => ranks.get(id)!));
      ranks.set(node.id, Math.max(0, closest - 1));
    }
  }
  return ranks;
}

function buildLayers(vertices: Map<string, Vertex>): Vertex[][] {
  const layers: Vertex[][] = [];
  for (const vertex of vertices.values()) {
    while (layers.length <= vertex.layer) layers.push([]);
    layers[vertex.layer]!.push(vertex);
  }
  return layers;
}

/** Barycenter sweeps down and up; keeps the best ordering seen. */
function orderLayers(layers: Vertex[][], segments: readonly Segment[]): void {
  const upperOf = new Map<Vertex, Vertex[]>();
  const lowerOf = new Map<Vertex, Vertex[]>();
  for (const segment of segments) {
    upperOf.set(segment.lower, [...(upperOf.get(segment.lower) ?? []), segment.upper]);
    lowerOf.set(segment.upper, [...(lowerOf.get(segment.upper) ?? []), segment.lower]);
  }
  const position = new Map<Vertex, number>();
  const index = (): void => {
    for (const layer of layers) {
      layer.forEach((vertex, order) => {
        position.set(vertex, order);
      });
    }
  };
  index();
  let best = layers.map((layer) => [...layer]);
  let bestCrossings = countCrossings(layers, segments, position);
  for (let sweep = 0; sweep < SWEEPS && bestCrossings > 0; sweep++) {
    const isDown = sweep % 2 === 0;
    const sequence = layers.map((_, layer) => layer);
    if (!isDown) sequence.reverse();
    for (const layer of sequence.slice(1)) {
      const neighbours = isDown ? upperOf : lowerOf;
      const row = layers[layer]!;
      const keys = new Map<Vertex, number>();
      for (const vertex of row) {
        const around = neighbours.get(vertex) ?? [];
        keys.set(
          vertex,
          around.length === 0
            ? position.get(vertex)!
            : around.reduce((sum, other) => sum + position.get(other)!, 0) / around.length,
        );
      }
      row.sort((a, b) => keys.get(a)! - keys.get(b)! || position.get(a)! - position.get(b)!);
      row.forEach((vertex, order) => {
        position.set(vertex, order);
      });
    }
    const crossings = countCrossings(layers, segments, position);
    if (crossings < bestCrossings) {
      bestCrossings = crossings;
      best = layers.map((layer) => [...layer]);
    }
  }
  best.forEach((layer, order) => {
    layers[order] = layer;
  });
  index();
}

function countCrossings(
  layers: Vertex[][],
  segments: readonly Segment[],
  position: Map<Vertex, number>,
): number {
  const byLayer: Segment[][] = layers.map(() => []);
  for (const segment of segments) byLayer[segment.upper.layer]!.push(segment);
  let crossings = 0;
  for (const group of byLayer) {
    for (let i = 0; i < group.length; i++) {
      for (let j = i + 1; j < group.length; j++) {
        const a = group[i]!;
        const b = group[j]!;
        const upper = position.get(a.upper)! - position.get(b.upper)!;
        const lower = position.get(a.lower)! - position.get(b.lower)!;
        if (upper * lower < 0) crossings++;
      }
    }
  }
  return crossings;
}

function placeHorizontally(
  layers: Vertex[][],
  segments: readonly Segment[],
  nodeGap: number,
  edgeGap: number,
): void {
  const upperOf = new Map<Vertex, Array<[Vertex, number]>>();
  const lowerOf = new Map<Vertex, Array<[Vertex, number]>>();
  for (const segment of segments) {
    upperOf.set(segment.lower, [...(upperOf.get(segment.lower) ?? []), [segment.upper, segment.weight]]);
    lowerOf.set(segment.upper, [...(lowerOf.get(segment.upper) ?? []), [segment.lower, segment.weight]]);
  }
  const separations = layers.map((row) =>
    row.slice(1).map((vertex, index) => {
      const left = row[index]!;
      const gap = left.edge === undefined && vertex.edge === undefined ? nodeGap : edgeGap;
      return left.width / 2 + vertex.width / 2 + gap;
    }),
  );
  // Start packed from the left, then relax towards the neighbours.
  layers.forEach((row, layer) => {
    let x = 0;
    row.forEach((vertex, index) => {
      x = index === 0 ? vertex.width / 2 : x + separations[layer]![index - 1]!;
      vertex.x = x;
    });
  });
  const relax = (layer: number, sides: Array<Map<Vertex, Array<[Vertex, number]>>>): void => {
    const row = layers[layer]!;
    if (row.length === 0) return;
    const desired: number[] = [];
    const weights: number[] = [];
    for (const vertex of row) {
      let sum = 0;
      let weight = 0;
      for (const side of sides) {
        for (const [other, w] of side.get(vertex) ?? []) {
          sum += (other.x + other.anchor) * w;
          weight += w;
        }
      }
      desired.push(weight === 0 ? vertex.x : sum / weight - vertex.anchor);
      weights.push(weight === 0 ? 0.5 : weight);
    }
    const xs = isotonicPlacement(desired, weights, separations[layer]!);
    row.forEach((vertex, index) => {
      vertex.x = xs[index]!;
    });
  };
  for (let round = 0; round < PLACEMENT_ROUNDS; round++) {
    for (let layer = 1; layer < layers.length; layer++) relax(layer, [upperOf]);
    for (let layer = layers.length - 2; layer >= 0; layer--) relax(layer, [lowerOf]);
  }
  for (let layer = 0; layer < layers.length; layer++) relax(layer, [upperOf, lowerOf]);
}

/**
 * Positions closest (weighted least squares) to `desired` that keep the order and at least
 * `separations[i]` between neighbours i and i+1: with offsets o_i the constraints become
 * y_{i+1} ≥ y_i for y_i = x_i − o_i, an isotonic regression solved by pooling adjacent violators.
 */
export function isotonicPlacement(desired: number[], weights: number[], separations: number[]): number[] {
  const offsets: number[] = [0];
  for (let index = 1; index < desired.length; index++) {
    offsets.push(offsets[index - 1]! + separations[index - 1]!);
  }
  const blocks: Array<{ total: number; weight: number; count: number }> = [];
  desired.forEach((value, index) => {
    const weight = weights[index]!;
    blocks.push({ total: (value - offsets[index]!) * weight, weight, count: 1 });
    while (blocks.length > 1) {
      const last = blocks[blocks.length - 1]!;
      const previous = blocks[blocks.length - 2]!;
      if (previous.total / previous.weight <= last.total / last.weight) break;
      blocks.pop();
      previous.total += last.total;
      previous.weight += last.weight;
      previous.count += last.count;
    }
  });
  const result: number[] = [];
  for (const block of blocks) {
    const mean = block.total / block.weight;
    for (let step = 0; step < block.count; step++) result.push(mean + offsets[result.length]!);
  }
  return result;
}

function placeVertically(layers: Vertex[][], layerGap: number): { height: number; centers: number[] } {
  const centers: number[] = [];
  let top = 0;
  layers.forEach((row, layer) => {
    const height = row.reduce((max, vertex) => Math.max(max, vertex.height), 0);
    centers.push(top + height / 2);
    top += height + (layer < layers.length - 1 ? layerGap : 0);
  });
  return { height: top, centers };
}
