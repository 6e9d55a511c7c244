import {
  DOT_RADIUS,
  type EdgeRoute,
  FINAL_INSET,
  layoutWithElk,
  type PlacedText,
  type Point,
  type StateBox,
  type StatechartLayout,
} from "./layout-with-elk.js";
import type { MachineGraph } from "./machine-graph.js";
import { SMALL_FONT, TITLE_FONT } from "./text-width.js";

/**
 * Draws the graph model as one self-contained SVG document (styles inline, no fonts or scripts
 * to fetch), so the same string serves `agentloop viz --format svg` and the web UI.
 *
 * Every state is a `<g class="al-state" data-state-id="<machine>.<path>">`; the groups are
 * siblings, not nested, so a page can mark a state `active` (or `active-leaf`) without the style
 * leaking into its children. Every transition to a state is a `<g class="al-edge">` carrying
 * `data-source` and `data-target` state ids, so a page can mark the one just `taken`. Ids inside
 * the document (the arrow markers) carry the machine name so several drawings can be inlined in
 * one page. The document scales to its container (`viewBox`, centred).
 */
export async function toSvg(graph: MachineGraph): Promise<string> {
  return drawStatechart(graph, await layoutWithElk(graph));
}

/** The SVG text of a laid-out statechart. */
export function drawStatechart(graph: MachineGraph, layout: StatechartLayout): string {
  const scope = `al-${graph.name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const arrow = `${scope}-arrow`;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="al-statechart" data-machine="${escapeXml(graph.name)}" ` +
      `width="${layout.width}" height="${layout.height}" viewBox="0 0 ${layout.width} ${layout.height}" ` +
      `preserveAspectRatio="xMidYMid meet" role="img" aria-label="${escapeXml(`${graph.name} statechart`)}">`,
  );
  parts.push(`<title>${escapeXml(`${graph.name} statechart`)}</title>`);
  parts.push(`<style>${style(arrow)}</style>`);
  parts.push(
    `<defs>${marker(arrow, "al-arrow")}${marker(`${arrow}-taken`, "al-arrow al-arrow-taken")}</defs>`,
  );
  parts.push(`<g class="al-states">`);
  for (const box of layout.boxes) parts.push(drawState(box));
  parts.push(`</g>`);
  parts.push(`<g class="al-edges">`);
  for (const initial of layout.initials) {
    parts.push(
      `<g class="al-initial" data-initial-of="${escapeXml(initial.container)}">` +
        `<circle cx="${fmt(initial.dot.x)}" cy="${fmt(initial.dot.y)}" r="${DOT_RADIUS}" class="al-initial-dot"/>` +
        `<path d="${orthogonalPath(initial.points)}" class="al-edge-line" marker-end="url(#${arrow})"/></g>`,
    );
  }
  for (const edge of layout.edges) parts.push(drawEdge(edge, arrow));
  parts.push(`</g>`);
  parts.push(`</svg>`);
  return parts.join("\n");
}

function marker(id: string, className: string): string {
  return (
    `<marker id="${id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" ` +
    `orient="auto-start-reverse" markerUnits="userSpaceOnUse"><path d="M0,1 L10,5 L0,9 z" class="${className}"/></marker>`
  );
}

function drawState(box: StateBox): string {
  const { state } = box;
  const classes = ["al-state", `al-${state.type}`];
  if (box.depth === 0) classes.push("al-root");
  const out: string[] = [
    `<g class="${classes.join(" ")}" data-state-id="${escapeXml(state.id)}" data-state-type="${state.type}">`,
  ];
  const radius = state.children.length > 0 ? 10 : 8;
  const dash = box.isRegion ? ` stroke-dasharray="5 4"` : "";
  out.push(
    `<rect class="al-box" x="${fmt(box.x)}" y="${fmt(box.y)}" width="${fmt(box.width)}" height="${fmt(box.height)}" rx="${radius}"${dash}/>`,
  );
  if (state.type === "final") {
    out.push(
      `<rect class="al-box-inner" x="${fmt(box.x + FINAL_INSET)}" y="${fmt(box.y + FINAL_INSET)}" ` +
        `width="${fmt(box.width - 2 * FINAL_INSET)}" height="${fmt(box.height - 2 * FINAL_INSET)}" rx="${radius - 3}"/>`,
    );
  }
  const kind = state.type === "parallel" ? `<tspan class="al-kind"> (parallel)</tspan>` : "";
  out.push(`<text class="al-title"${at(box.title)}>${escapeXml(box.title.text)}${kind}</text>`);
  for (const line of box.lines) {
    out.push(`<text class="al-line al-line-${line.kind}"${at(line)}>${escapeXml(line.text)}</text>`);
  }
  if (state.description) out.push(`<desc>${escapeXml(state.description)}</desc>`);
  out.push(`</g>`);
  return out.join("");
}

function drawEdge(edge: EdgeRoute, arrow: string): string {
  const { transition, label } = edge;
  const out = [
    `<g class="al-edge al-edge-${transition.kind}" data-transition-id="${escapeXml(transition.id)}" ` +
      `data-source="${escapeXml(transition.source)}" data-target="${escapeXml(edge.target)}">`,
    `<path d="${orthogonalPath(edge.points)}" class="al-edge-line" marker-end="url(#${arrow})"/>`,
    `<text class="al-label">${label.lines
      .map((line) => `<tspan${at(line)}>${escapeXml(line.text)}</tspan>`)
      .join("")}</text>`,
    `</g>`,
  ];
  return out.join("");
}

/** ` x=".." y=".."`, plus the anchor when it is not the default. */
function at(text: PlacedText): string {
  const anchor = text.anchor === "start" ? "" : ` text-anchor="${text.anchor}"`;
  return ` x="${fmt(text.x)}" y="${fmt(text.y)}"${anchor}`;
}

const CORNER = 6;

/** Straight segments through `points` with each bend rounded off. */
function orthogonalPath(points: readonly Point[]): string {
  if (points.length === 0) return "";
  let d = `M${pt(points[0]!)}`;
  for (let index = 1; index < points.length - 1; index++) {
    const before = points[index - 1]!;
    const corner = points[index]!;
    const after = points[index + 1]!;
    const radius = Math.min(CORNER, distance(before, corner) / 2, distance(corner, after) / 2);
    d += ` L${pt(towards(corner, before, radius))} Q${pt(corner)} ${pt(towards(corner, after, radius))}`;
  }
  if (points.length > 1) d += ` L${pt(points[points.length - 1]!)}`;
  return d;
}

function distance(a: Point, b: Point): number {
  return Math.hypot(b.x - a.x, b.y - a.y);
}

/** The point `length` away from `from` in the direction of `to`. */
function towards(from: Point, to: Point, length: number): Point {
  const total = distance(from, to);
  if (total === 0) return from;
  return { x: from.x + ((to.x - from.x) * length) / total, y: from.y + ((to.y - from.y) * length) / total };
}

function pt(point: Point): string {
  return `${fmt(point.x)},${fmt(point.y)}`;
}

function fmt(value: number): string {
  return String(Math.round(value * 10) / 10);
}

/** Escapes text and attribute values. */
export function escapeXml(text: string): string {
  return text.replace(/[&<>"']/g, (char) => ESCAPES[char]!);
}

const ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&apos;",
};

const FONT = `system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif`;
const ACCENT = "#2563eb";

// Scoped under .al-statechart: the drawing is also inlined into the UI page.
function style(arrow: string): string {
  return [
    `.al-statechart{font-family:${FONT};}`,
    `.al-statechart .al-box{fill:#ffffff;stroke:#94a3b8;stroke-width:1.2;}`,
    `.al-statechart .al-compound>.al-box,.al-statechart .al-parallel>.al-box{fill:#f8fafc;}`,
    `.al-statechart .al-root>.al-box{fill:#f1f5f9;stroke:#cbd5e1;}`,
    `.al-statechart .al-box-inner{fill:none;stroke:#94a3b8;stroke-width:1.2;}`,
    `.al-statechart .al-title{font-size:${TITLE_FONT}px;font-weight:600;fill:#0f172a;}`,
    `.al-statechart .al-kind{font-weight:400;fill:#64748b;}`,
    `.al-statechart .al-line{font-size:${SMALL_FONT}px;fill:#475569;}`,
    `.al-statechart .al-line-internal{font-style:italic;fill:#64748b;}`,
    `.al-statechart .al-edge-line{fill:none;stroke:#64748b;stroke-width:1.3;}`,
    `.al-statechart .al-arrow{fill:#64748b;}`,
    `.al-statechart .al-arrow-taken{fill:${ACCENT};}`,
    `.al-statechart .al-edge-always>.al-edge-line{stroke-dasharray:4 3;}`,
    `.al-statechart .al-edge-actorError>.al-edge-line{stroke:#b91c1c;}`,
    `.al-statechart .al-label{font-size:${SMALL_FONT}px;fill:#334155;paint-order:stroke;stroke:#ffffff;stroke-width:4px;stroke-linejoin:round;}`,
    `.al-statechart .al-edge-actorError>.al-label{fill:#b91c1c;}`,
    `.al-statechart .al-initial-dot{fill:#334155;}`,
    `.al-statechart .al-state.active>.al-box{fill:#eff6ff;stroke:${ACCENT};stroke-width:2;}`,
    `.al-statechart .al-state.active-leaf>.al-box{fill:#dbeafe;stroke:#1d4ed8;stroke-width:2.6;}`,
    `.al-statechart .al-state.active-leaf>.al-title,.al-statechart .al-state.active>.al-title{fill:#1e3a8a;}`,
    // The transition just taken (set by the page).
    `.al-statechart .al-edge.taken>.al-edge-line{stroke:${ACCENT};stroke-width:2.6;stroke-dasharray:none;marker-end:url(#${arrow}-taken);}`,
    `.al-statechart .al-edge.taken>.al-label{fill:#1d4ed8;}`,
  ].join("");
}
