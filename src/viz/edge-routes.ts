import type { Point } from "./layered-layout.js";
import type { EdgeRoute, Rect, StateBox } from "./layout-statechart.js";
import type { GraphTransition } from "./machine-graph.js";
import { SMALL_FONT, textWidth } from "./text-width.js";

/**
 * Where edges meet boxes, and the edges the layered levels do not route: self-loops and direct
 * lines between a state and its ancestor or across parallel regions.
 */

/** How far a self-loop reaches out to the right of its box. */
export const LOOP_REACH = 22;
/** Vertical distance between stacked self-loops. */
export const LOOP_SPACING = 16;
/** Height of an edge label's line. */
export const LABEL_HEIGHT = 14;

export type Side = "top" | "bottom";

/** Spreads the edges that meet one side of a box along it, ordered by where they come from. */
export class PortAllocator {
  private readonly requests = new Map<string, Array<{ towards: number; handle: number }>>();
  private readonly points: Point[] = [];

  constructor(private readonly boxOf: Map<string, StateBox>) {}

  /** Registers an edge end on `side` of the state's box, heading towards `towards` (x). */
  request(stateId: string, side: Side, towards: number): number {
    const key = `${side}:${stateId}`;
    const handle = this.points.length;
    this.points.push({ x: 0, y: 0 });
    this.requests.set(key, [...(this.requests.get(key) ?? []), { towards, handle }]);
    return handle;
  }

  assign(): void {
    for (const [key, list] of this.requests) {
      const [side, stateId] = splitKey(key);
      const box = this.boxOf.get(stateId)!;
      const sorted = [...list].sort((a, b) => a.towards - b.towards || a.handle - b.handle);
      const spread = Math.min(box.width - 20, (sorted.length - 1) * 18);
      sorted.forEach((request, index) => {
        const offset = sorted.length === 1 ? 0 : (index / (sorted.length - 1) - 0.5) * spread;
        this.points[request.handle] = {
          x: box.x + box.width / 2 + offset,
          y: side === "top" ? box.y : box.y + box.height,
        };
      });
    }
  }

  get(handle: number): Point {
    return this.points[handle]!;
  }
}

function splitKey(key: string): [Side, string] {
  const index = key.indexOf(":");
  return [key.slice(0, index) as Side, key.slice(index + 1)];
}

/** A self transition: a small loop on the box's right side, stacked by `index`, label beside it. */
export function loopRoute(transition: GraphTransition, box: StateBox, index: number): EdgeRoute {
  const right = box.x + box.width;
  const y = box.y + 8 + index * LOOP_SPACING;
  const points = [
    { x: right, y },
    { x: right + LOOP_REACH, y: y - 4 },
    { x: right + LOOP_REACH, y: y + 14 },
    { x: right, y: y + 10 },
  ];
  const text = transition.label;
  return {
    transition,
    target: transition.source,
    shape: "loop",
    points,
    label: {
      text,
      x: right + LOOP_REACH + 4,
      y: y + 5 - LABEL_HEIGHT / 2,
      width: textWidth(text, SMALL_FONT),
      height: LABEL_HEIGHT,
    },
  };
}

/**
 * A transition drawn straight, outside the layered levels: into a state from its own ancestor
 * (in from the ancestor's left wall), out to an ancestor (to its right wall), or across regions.
 */
export function directRoute(
  transition: GraphTransition,
  target: string,
  from: StateBox,
  to: StateBox,
): EdgeRoute {
  const contains = (outer: StateBox, inner: StateBox): boolean =>
    inner.state.id.startsWith(`${outer.state.id}.`);
  let start: Point;
  let end: Point;
  if (contains(from, to)) {
    // "From anywhere in this state": in from the container's left wall, level with the target.
    const y = to.y + to.height / 2;
    start = { x: from.x, y };
    end = { x: to.x, y };
  } else if (contains(to, from)) {
    // Back out to the enclosing state: to its right wall.
    const y = from.y + from.height / 2;
    start = { x: from.x + from.width, y };
    end = { x: to.x + to.width, y };
  } else {
    start = borderPoint(from, centerOf(to));
    end = borderPoint(to, centerOf(from));
  }
  const text = transition.label;
  const width = textWidth(text, SMALL_FONT);
  return {
    transition,
    target,
    shape: "direct",
    points: [start, end],
    label: {
      text,
      x: start.y === end.y ? Math.min(start.x, end.x) + 8 : (start.x + end.x) / 2 + 4,
      y: start.y === end.y ? start.y - LABEL_HEIGHT - 1 : (start.y + end.y) / 2 - LABEL_HEIGHT / 2,
      width,
      height: LABEL_HEIGHT,
    },
  };
}

function centerOf(rect: Rect): Point {
  return { x: rect.x + rect.width / 2, y: rect.y + rect.height / 2 };
}

/** Where the ray from `rect`'s centre towards `towards` leaves the rectangle. */
function borderPoint(rect: Rect, towards: Point): Point {
  const center = centerOf(rect);
  const dx = towards.x - center.x;
  const dy = towards.y - center.y;
  if (dx === 0 && dy === 0) return center;
  const scale = Math.min(
    dx === 0 ? Number.POSITIVE_INFINITY : rect.width / 2 / Math.abs(dx),
    dy === 0 ? Number.POSITIVE_INFINITY : rect.height / 2 / Math.abs(dy),
  );
  return { x: center.x + dx * scale, y: center.y + dy * scale };
}
