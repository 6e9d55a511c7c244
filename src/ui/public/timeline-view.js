// The chat timeline (waterfall) of the selected session: iteration bands, model requests (time to
// first token, streaming, resets), tool calls in parallel lanes, waits (compaction, tool approval),
// tokens per request and the context gauge. Built by timeline-model.js; drawn here as positioned
// divs (widths in %, so the pane can be resized), at most once per frame however fast events come.

import { element } from "./dom.js";
import { formatDuration, layoutTimeline } from "./timeline-layout.js";
import { TimelineModel } from "./timeline-model.js";
import { contextGauge, formatTokens, tokenChart, usageText } from "./timeline-usage-view.js";

/** A running chat with no event for this long is drawn up to its last event, not to "now". */
const STALL_MS = 5 * 60_000;
/** The bar labels' font size (style.css `.tl-bar-label`), for measuring them before drawing. */
const LABEL_FONT_PX = 11;

export class TimelineView {
  /** `root` is emptied and filled; `summary` gets a one-line description of the shown chat. */
  constructor(root, summary) {
    this.root = root;
    this.summary = summary;
    this.model = new TimelineModel();
    /** The chat chosen in the picker; null follows the latest chat. */
    this.pinned = null;
    this.frame = 0;
    this.chatCount = -1;
    this.picker = element("select", {
      className: "timeline-chat",
      "data-testid": "timeline-chat",
      "aria-label": "chat shown in the timeline",
    });
    this.picker.addEventListener("change", () => {
      this.pinned = this.picker.value === "" ? null : this.picker.value;
      this.render();
    });
    this.body = element("div", { className: "timeline-body" });
    root.replaceChildren(element("div", { className: "timeline-head" }, this.picker), this.body);
    // A collapsed panel is not drawn; opening it draws the current state.
    this.panel = root.closest("details");
    this.onToggle = () => this.schedule();
    this.panel?.addEventListener("toggle", this.onToggle);
    // Labels are placed for the track's width in px: a resized pane places them again.
    this.width = 0;
    this.resizeObserver = new ResizeObserver(() => {
      if (this.body.clientWidth !== this.width) this.schedule();
    });
    this.resizeObserver.observe(this.body);
    // Running bars grow with the clock between events (a long tool call sends none).
    this.ticker = setInterval(() => {
      const chat = this.shownChat();
      if (chat && this.isLive(chat)) this.schedule();
    }, 1000);
    this.render();
  }

  dispose() {
    clearInterval(this.ticker);
    this.panel?.removeEventListener("toggle", this.onToggle);
    this.resizeObserver.disconnect();
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
  }

  apply(event) {
    if (this.model.apply(event)) this.schedule();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  shownChat() {
    return (this.pinned && this.model.get(this.pinned)) || this.model.latest();
  }

  isLive(chat) {
    return chat.endMs === null && Date.now() - chat.lastMs < STALL_MS;
  }

  render() {
    this.updatePicker();
    const chat = this.shownChat();
    this.root.setAttribute("data-chat-id", chat ? chat.chatId : "");
    if (!chat) {
      this.summary.textContent = "";
      this.body.replaceChildren(
        element("p", { className: "timeline-empty" }, "No chat yet: the timeline fills as events arrive."),
      );
      return;
    }
    const now = this.isLive(chat) ? Math.max(Date.now(), chat.lastMs) : chat.lastMs;
    const layout = layoutTimeline(chat, now);
    this.root.setAttribute("data-status", layout.status);
    this.summary.textContent = describe(layout);
    this.summary.title = this.summary.textContent;
    if (this.panel && !this.panel.open) return;
    // The track is the body less the row labels (78 px); a collapsed panel measures 0.
    this.width = this.body.clientWidth;
    const trackPx = this.width > 200 ? this.width - 78 : 400;
    this.body.replaceChildren(
      waterfall(layout, trackPx),
      legend(),
      element("div", { className: "timeline-foot" }, tokenChart(layout), contextGauge(layout)),
    );
  }

  updatePicker() {
    const chats = [...this.model.chats.values()];
    if (
      chats.length === this.chatCount &&
      chats.every((chat, index) => this.labels?.[index] === label(chat))
    ) {
      return;
    }
    this.chatCount = chats.length;
    this.labels = chats.map(label);
    const options = [element("option", { value: "" }, "latest chat (follows live)")];
    chats.forEach((chat, index) => {
      options.push(element("option", { value: chat.chatId }, `${index + 1}. ${label(chat)}`));
    });
    this.picker.replaceChildren(...options);
    this.picker.value = this.pinned ?? "";
  }
}

function label(chat) {
  if (chat.text === null)
    return chat.requests.length === 0 &&
      chat.waits.length > 0 &&
      chat.waits.every((wait) => wait.kind === "compaction")
      ? "compaction"
      : "(earlier)";
  const oneLine = chat.text.replace(/\s+/g, " ").trim();
  return oneLine.length > 48 ? `${oneLine.slice(0, 47)}…` : oneLine || "(empty message)";
}

function describe(layout) {
  const failedTools = layout.tools.filter((tool) => tool.status === "failed").length;
  const resets = layout.requests.reduce((sum, request) => sum + request.resets.length, 0);
  const parts = [
    layout.status === "running" ? "running" : layout.status,
    formatDuration(layout.spanMs),
    plural(layout.iterations.length, "iteration"),
    plural(layout.requests.length, "request"),
  ];
  if (resets > 0) parts.push(plural(resets, "retry", "retries"));
  if (layout.tools.length > 0) {
    parts.push(
      `${plural(layout.tools.length, "tool call")}${failedTools > 0 ? ` (${failedTools} failed)` : ""}`,
    );
  }
  if (layout.usage) parts.push(`${formatTokens(layout.usage.total)} tokens`);
  return parts.join(" · ");
}

function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

const percent = (fraction) => `${(fraction * 100).toFixed(3)}%`;

function place(node, x0, x1) {
  node.style.left = percent(x0);
  node.style.width = percent(Math.max(0, x1 - x0));
  return node;
}

/**
 * Labels the bars of one row without overlaps: each bar gets the first of its texts (long, then
 * short) that fits inside it, or after it before the next bar, or before it after what is already
 * drawn (outside first for bars whose inside matters: `isOutsideFirst`); a bar with no room keeps
 * only its tooltip.
 */
function labelBars(bars, trackPx) {
  const measure = textMeasurer();
  const sorted = [...bars].sort((a, b) => a.x0 - b.x0);
  let occupied = Number.NEGATIVE_INFINITY;
  sorted.forEach((bar, index) => {
    const left = bar.x0 * trackPx;
    const right = Math.max(bar.x1 * trackPx, left + 3);
    const next = sorted[index + 1];
    const limit = Math.min(next ? next.x0 * trackPx - 4 : trackPx, trackPx);
    let placed;
    for (const text of bar.texts) {
      const width = measure(text) + 10;
      const sides = {
        inside: right - left >= width + 4 ? right : undefined,
        after: right + 4 + width <= limit ? right + 4 + width : undefined,
        before: left - 4 - width >= Math.max(occupied + 4, 0) ? right : undefined,
      };
      const order = bar.isOutsideFirst ? ["after", "before", "inside"] : ["inside", "after", "before"];
      const side = order.find((candidate) => sides[candidate] !== undefined);
      if (side) {
        placed = { text, side, end: sides[side] };
        break;
      }
    }
    if (placed) {
      bar.node.append(element("span", { className: `tl-bar-label tl-label-${placed.side}` }, placed.text));
    }
    occupied = Math.max(occupied, placed ? placed.end : right);
  });
  return bars.map((bar) => bar.node);
}

let canvasContext;

/** Width in px of a label's text in the page's font (canvas metrics; an estimate without canvas). */
function textMeasurer() {
  canvasContext ??= document.createElement("canvas").getContext("2d");
  if (!canvasContext) return (text) => text.length * LABEL_FONT_PX * 0.62;
  canvasContext.font = `${LABEL_FONT_PX}px ${getComputedStyle(document.body).fontFamily}`;
  return (text) => canvasContext.measureText(text).width;
}

function row(name, labelText, bars = [], trackPx = 0) {
  return element(
    "div",
    { className: `tl-row tl-row-${name}`, "data-row": name },
    element("div", { className: "tl-row-label" }, labelText),
    element("div", { className: "tl-track" }, ...labelBars(bars, trackPx)),
  );
}

/** Width of one character of the ticks' 10 px monospace font, with a margin. */
const TICK_CHAR_PX = 6.5;
const TICK_GAP_PX = 8;

/**
 * The ticks whose labels fit on a track `trackPx` wide without touching: a label that would overlap
 * the one before is left out (its grid line stays). The last one, drawn right-aligned, wins over
 * the one before it, so the axis always ends with the chat's span.
 */
export function readableTicks(ticks, trackPx) {
  if (!(trackPx > 0)) return ticks;
  const boxes = ticks.map((tick) => {
    const width = tick.label.length * TICK_CHAR_PX + 3;
    const left = tick.x > 0.94 ? tick.x * trackPx - width : tick.x * trackPx;
    return { tick, left, right: left + width };
  });
  const last = boxes.length > 1 ? boxes[boxes.length - 1] : undefined;
  const shown = [];
  let right = Number.NEGATIVE_INFINITY;
  for (const box of boxes) {
    if (box === last) break;
    if (box.left < right + TICK_GAP_PX) continue;
    if (last && box.right + TICK_GAP_PX > last.left) continue;
    shown.push(box.tick);
    right = box.right;
  }
  if (last) shown.push(last.tick);
  return shown;
}

function waterfall(layout, trackPx) {
  const axis = element(
    "div",
    { className: "tl-row tl-row-axis" },
    element("div", { className: "tl-row-label" }),
    element(
      "div",
      { className: "tl-track" },
      ...readableTicks(layout.ticks, trackPx).map((tick) => {
        const node = element("span", { className: "tl-tick", "data-testid": "timeline-tick" }, tick.label);
        node.style.left = percent(tick.x);
        if (tick.x > 0.94) node.classList.add("tl-tick-last");
        return node;
      }),
    ),
  );

  const bands = element("div", { className: "tl-bands" });
  const gridLines = layout.ticks.map((tick) => {
    const line = element("div", { className: "tl-gridline" });
    line.style.left = percent(tick.x);
    return line;
  });
  bands.append(...gridLines);
  layout.iterations.forEach((band, index) => {
    const node = place(
      element(
        "div",
        {
          className: `tl-band${index % 2 === 1 ? " tl-band-alt" : ""}`,
          "data-testid": "timeline-iteration",
          "data-iteration": band.iteration,
          "data-open": String(band.isOpen),
          title: `iteration ${band.iteration}${band.final ? " (final, no tools)" : ""} · ${formatDuration(band.endMs - band.startMs)}`,
        },
        element("span", { className: "tl-band-label" }, `i${band.iteration}${band.final ? " final" : ""}`),
      ),
      band.x0,
      band.x1,
    );
    bands.append(node);
  });

  const requests = layout.requests.map((request) => requestBar(request, layout));
  const toolRows = [];
  const lanes = Math.max(1, layout.toolLanes);
  for (let lane = 0; lane < lanes; lane++) {
    const tools = layout.tools.filter((tool) => tool.lane === lane).map(toolBar);
    toolRows.push(row(`tools-${lane}`, lane === 0 ? "tools" : "", tools, trackPx));
  }
  const waitRows = [];
  for (let lane = 0; lane < layout.waitLanes; lane++) {
    const waits = layout.waits.filter((wait) => wait.lane === lane).map(waitBar);
    waitRows.push(row(`waits-${lane}`, lane === 0 ? "waits" : "", waits, trackPx));
  }

  // Each asked chat in a lane of its own under the tools, indented by how deep it sits.
  const childRows = layout.children.map((child, index) => {
    const name = `${"↳".repeat(child.depth)} ${child.agent}`;
    const node = row(`child-${index}`, name, [childBar(child)], trackPx);
    node.querySelector(".tl-row-label").title =
      `${child.agent} / ${child.session}, asked by ${child.depth === 1 ? `the call ${child.toolCallId}` : "the lane above"}`;
    return node;
  });

  const rows = element(
    "div",
    { className: "tl-rows" },
    bands,
    row("iterations", "iterations"),
    row("model", "model", requests, trackPx),
    ...toolRows,
    ...childRows,
    ...waitRows,
  );
  return element("div", { className: "tl-waterfall", "data-testid": "timeline-waterfall" }, axis, rows);
}

function requestBar(request, layout) {
  const width = Math.max(request.x1 - request.x0, 1e-9);
  const inside = (x) => (x - request.x0) / width;
  const node = element("div", {
    className: "tl-bar tl-request",
    "data-testid": "timeline-request",
    "data-iteration": request.iteration,
    "data-index": request.index,
    "data-status": request.status,
    "data-attempts": request.attempts,
    "data-resets": request.resets.length,
    title: requestTitle(request),
  });
  place(node, request.x0, request.x1);
  for (const segment of request.segments) {
    node.append(
      place(
        element("div", { className: `tl-seg tl-seg-${segment.kind}`, "data-attempt": segment.attempt }),
        inside(segment.x0),
        inside(segment.x1),
      ),
    );
  }
  for (const reset of request.resets) {
    const mark = element("div", {
      className: "tl-reset",
      "data-testid": "timeline-reset",
      "data-attempt": reset.attempt,
      title: `attempt ${reset.attempt} reset after ${formatDuration(reset.ms - layout.startMs)}: ${reset.reason}${reset.error ? ` (${reset.error.name}: ${reset.error.message})` : ""}`,
    });
    mark.style.left = percent(inside(reset.x));
    node.append(mark);
  }
  const parts = [];
  if (request.ttftMs !== null) parts.push(`ttft ${formatDuration(request.ttftMs)}`);
  if (request.resets.length > 0) parts.push(`↻${request.resets.length}`);
  parts.push(formatDuration(request.durationMs));
  const texts = [parts.join(" · "), formatDuration(request.durationMs)];
  return { node, x0: request.x0, x1: request.x1, texts, isOutsideFirst: true };
}

function requestTitle(request) {
  const lines = [
    `model request ${request.index + 1} (iteration ${request.iteration}${request.final ? ", final" : ""}) · ${request.status}`,
    `time to first token: ${request.ttftMs === null ? "–" : formatDuration(request.ttftMs)}`,
    `streaming: ${request.streamMs === null ? "–" : formatDuration(request.streamMs)}`,
    `total: ${formatDuration(request.durationMs)}`,
  ];
  if (request.resets.length > 0) {
    lines.push(
      `${plural(request.resets.length, "reset")}: ${request.resets.map((reset) => reset.reason).join(", ")}`,
    );
  }
  if (request.usage) lines.push(usageText(request.usage));
  if (request.toolCalls) lines.push(`asked for ${plural(request.toolCalls, "tool call")}`);
  return lines.join("\n");
}

function toolBar(tool) {
  const node = element("div", {
    className: "tl-bar tl-tool",
    "data-testid": "timeline-tool",
    "data-tool-call-id": tool.toolCallId,
    "data-tool-name": tool.toolName,
    "data-status": tool.status,
    "data-lane": tool.lane,
    title: `${tool.toolName} (${tool.toolCallId}) · ${tool.status} · ${formatDuration(tool.durationMs)}${tool.error ? `\n${tool.error.name}: ${tool.error.message}` : ""}`,
  });
  place(node, tool.x0, tool.x1);
  const mark = tool.status === "failed" ? " ✕" : "";
  const texts = [`${tool.toolName}${mark} · ${formatDuration(tool.durationMs)}`, `${tool.toolName}${mark}`];
  return { node, x0: tool.x0, x1: tool.x1, texts };
}

function childBar(child) {
  const node = element("div", {
    className: "tl-bar tl-child",
    "data-testid": "timeline-child",
    "data-agent": child.agent,
    "data-session": child.session,
    "data-chat-id": child.chatId,
    "data-depth": child.depth,
    "data-status": child.status,
    title: [
      `${child.agent} / ${child.session} · ${child.status} · ${formatDuration(child.durationMs)}`,
      child.error ?? "",
      ...child.steps.map(
        (step) => `${step.toolName} · ${step.status} · ${formatDuration(step.endMs - step.startMs)}`,
      ),
    ]
      .filter(Boolean)
      .join("\n"),
  });
  place(node, child.x0, child.x1);
  const width = Math.max(child.x1 - child.x0, 1e-9);
  for (const step of child.steps) {
    node.append(
      place(
        element("div", {
          className: "tl-seg tl-child-step",
          "data-testid": "timeline-child-step",
          "data-tool-name": step.toolName,
          "data-status": step.status,
        }),
        (step.x0 - child.x0) / width,
        (step.x1 - child.x0) / width,
      ),
    );
  }
  const texts = [`${child.agent} / ${child.session} · ${formatDuration(child.durationMs)}`, child.agent];
  return { node, x0: child.x0, x1: child.x1, texts, isOutsideFirst: true };
}

function waitBar(wait) {
  const approval = wait.kind === "approval";
  const decision = !approval || wait.approved === null ? "" : wait.approved ? "approved" : "denied";
  const node = element("div", {
    className: `tl-bar tl-wait tl-wait-${wait.kind}`,
    "data-testid": "timeline-wait",
    "data-kind": wait.kind,
    "data-status": wait.status,
    "data-decision": decision || undefined,
    title: [
      `${wait.kind}${wait.topic ? ` (topic: ${wait.topic})` : ""} · ${wait.status} · ${formatDuration(wait.durationMs)}`,
      approval ? `${wait.toolName} (${wait.toolCallId})` : "",
      wait.heldBy ? `held by ${wait.heldBy.agent} / ${wait.heldBy.session}` : "",
      decision ? `${decision}${wait.reason ? `: ${wait.reason}` : ""}` : "",
      wait.usage ? `summary request: ${usageText(wait.usage)}` : "",
      typeof wait.tokenUsed === "number" ? `context after: ${formatTokens(wait.tokenUsed)} tokens` : "",
      wait.error ? `${wait.error.name}: ${wait.error.message}` : "",
    ]
      .filter(Boolean)
      .join("\n"),
  });
  place(node, wait.x0, wait.x1);
  const name = approval ? `approval ${wait.toolName}${decision === "denied" ? " ✕" : ""}` : wait.kind;
  return {
    node,
    x0: wait.x0,
    x1: wait.x1,
    texts: [`${name} · ${formatDuration(wait.durationMs)}`, name, ...(approval ? [wait.kind] : [])],
  };
}

function legend() {
  const item = (className, text) =>
    element(
      "span",
      { className: "tl-legend-item" },
      element("span", { className: `tl-swatch ${className}` }),
      text,
    );
  return element(
    "div",
    { className: "tl-legend" },
    item("tl-seg-wait", "to first token"),
    item("tl-seg-stream", "streaming"),
    item("tl-seg-discarded", "reset"),
    item("tl-tool", "tool"),
    item("tl-tool-failed", "failed"),
    item("tl-wait-compaction", "compaction"),
    item("tl-wait-approval", "approval"),
    item("tl-child", "sub-agent"),
  );
}
