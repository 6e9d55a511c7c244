import type { Point } from "./layered-layout.js";
import { type EdgeRoute, layoutStatechart, type StateBox } from "./layout-statechart.js";
import type { MachineGraph } from "./machine-graph.js";
import { SMALL_FONT, TITLE_FONT } from "./text-width.js";

/**
 * Draws the graph model as one self-contained SVG document (styles inline, no fonts or scripts
 * to fetch), so the same string serves `agentloop viz --format svg` and the web UI.
 *
 * Every state is a `<g class="al-state" data-state-id="<machine>.<path>">`; the groups are
 * siblings, not nested, so a page can mark a state `active` (or `active-leaf`) without the style
 * leaking into its children. Ids inside the document (the arrow marker) carry the machine name so
 * several drawings can be inlined in one page.
 */
export function toSvg(graph: MachineGraph): string {
  const layout = layoutStatechart(graph);
  const scope = `al-${graph.name.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const arrow = `${scope}-arrow`;
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="al-statechart" data-machine="${escapeXml(graph.name)}" ` +
      `width="${layout.width}" height="${layout.height}" viewBox="0 0 ${layout.width} ${layout.height}" ` +
      `role="img" aria-label="${escapeXml(`${graph.name} statechart`)}">`,
  );
  parts.push(`<title>${escapeXml(`${graph.name} statechart`)}</title>`);
  parts.push(`<style>${STYLE}</style>`);
  parts.push(
    `<defs><marker id="${arrow}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" ` +
      `orient="auto-start-reverse" markerUnits="userSpaceOnUse"><path d="M0,1 L10,5 L0,9 z" class="al-arrow"/></marker></defs>`,
  );
  parts.push(`<g class="al-states">`);
  for (const box of layout.boxes) parts.push(drawState(box));
  parts.push(`</g>`);
  parts.push(`<g class="al-edges">`);
  for (const initial of layout.initials) {
    parts.push(
      `<g class="al-initial" data-initial-of="${escapeXml(initial.container)}">` +
        `<circle cx="${fmt(initial.dot.x)}" cy="${fmt(initial.dot.y)}" r="5" class="al-initial-dot"/>` +
        `<path d="${verticalPath(initial.points)}" class="al-edge-line" marker-end="url(#${arrow})"/></g>`,
    );
  }
  for (const edge of layout.edges) parts.push(drawEdge(edge, arrow));
  parts.push(`</g>`);
  parts.push(`</svg>`);
  return parts.join("\n");
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
      `<rect class="al-box-inner" x="${fmt(box.x + 4)}" y="${fmt(box.y + 4)}" width="${fmt(box.width - 8)}" height="${fmt(box.height - 8)}" rx="${radius - 3}"/>`,
    );
  }
  const isContainer = state.children.length > 0;
  if (isContainer) {
    out.push(
      `<text class="al-title" x="${fmt(box.x + 12)}" y="${fmt(box.y + 18)}">${escapeXml(state.key)}${
        state.type === "parallel" ? `<tspan class="al-kind"> (parallel)</tspan>` : ""
      }</text>`,
    );
    box.lines.forEach((line, index) => {
      out.push(
        `<text class="al-line al-line-${line.kind}" x="${fmt(box.x + 12)}" y="${fmt(box.y + 34 + index * 15)}">${escapeXml(line.text)}</text>`,
      );
    });
  } else {
    const centerX = box.x + box.width / 2;
    const titleY = box.lines.length === 0 ? box.y + box.height / 2 + 4.5 : box.y + 20;
    out.push(
      `<text class="al-title" x="${fmt(centerX)}" y="${fmt(titleY)}" text-anchor="middle">${escapeXml(state.key)}</text>`,
    );
    box.lines.forEach((line, index) => {
      out.push(
        `<text class="al-line al-line-${line.kind}" x="${fmt(centerX)}" y="${fmt(box.y + 36 + index * 15)}" text-anchor="middle">${escapeXml(line.text)}</text>`,
      );
    });
  }
  if (state.description) out.push(`<desc>${escapeXml(state.description)}</desc>`);
  out.push(`</g>`);
  return out.join("");
}

function drawEdge(edge: EdgeRoute, arrow: string): string {
  const { transition } = edge;
  const d =
    edge.shape === "loop"
      ? loopPath(edge.points)
      : edge.shape === "direct"
        ? `M${pt(edge.points[0]!)} L${pt(edge.points[1]!)}`
        : verticalPath(edge.points);
  const out = [
    `<g class="al-edge al-edge-${transition.kind}" data-transition-id="${escapeXml(transition.id)}" ` +
      `data-source="${escapeXml(transition.source)}" data-target="${escapeXml(edge.target)}">`,
    `<path d="${d}" class="al-edge-line" marker-end="url(#${arrow})"/>`,
  ];
  if (edge.label) {
    out.push(
      `<text class="al-label" x="${fmt(edge.label.x)}" y="${fmt(edge.label.y + edge.label.height - 3)}">${escapeXml(edge.label.text)}</text>`,
    );
  }
  out.push(`</g>`);
  return out.join("");
}

/** A smooth path through `points` whose tangent is vertical at every point (top-to-bottom flow). */
function verticalPath(points: readonly Point[]): string {
  if (points.length === 0) return "";
  let d = `M${pt(points[0]!)}`;
  for (let index = 1; index < points.length; index++) {
    const from = points[index - 1]!;
    const to = points[index]!;
    const middle = (from.y + to.y) / 2;
    d += ` C${fmt(from.x)},${fmt(middle)} ${fmt(to.x)},${fmt(middle)} ${pt(to)}`;
  }
  return d;
}

function loopPath(points: readonly Point[]): string {
  const [a, b, c, d] = points as [Point, Point, Point, Point];
  return `M${pt(a)} C${pt(b)} ${pt(c)} ${pt(d)}`;
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

// Scoped under .al-statechart: the drawing is also inlined into the UI page.
const STYLE = [
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
  `.al-statechart .al-edge-always>.al-edge-line{stroke-dasharray:4 3;}`,
  `.al-statechart .al-edge-actorError>.al-edge-line{stroke:#b91c1c;}`,
  `.al-statechart .al-label{font-size:${SMALL_FONT}px;fill:#334155;paint-order:stroke;stroke:#ffffff;stroke-width:3px;stroke-linejoin:round;}`,
  `.al-statechart .al-edge-actorError>.al-label{fill:#b91c1c;}`,
  `.al-statechart .al-initial-dot{fill:#334155;}`,
  `.al-statechart .al-state.active>.al-box{fill:#eff6ff;stroke:#2563eb;stroke-width:2;}`,
  `.al-statechart .al-state.active-leaf>.al-box{fill:#dbeafe;stroke:#1d4ed8;stroke-width:2.6;}`,
  `.al-statechart .al-state.active-leaf>.al-title,.al-statechart .al-state.active>.al-title{fill:#1e3a8a;}`,
].join("");
