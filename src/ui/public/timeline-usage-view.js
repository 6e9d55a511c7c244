// The chat timeline's usage views: tokens per request as a small stacked bar chart, and the context
// gauge (tokenUsed / tokenLimit against the compaction threshold).

import { element } from "./dom.js";

const numberFormat = new Intl.NumberFormat("en-US");

/** `12,345`. */
export function formatTokens(count) {
  return numberFormat.format(count);
}

const percent = (fraction) => `${(fraction * 100).toFixed(3)}%`;

/** One line of a request's token usage. */
export function usageText(usage) {
  return `tokens: prompt ${formatTokens(usage.prompt)} (cached ${formatTokens(usage.cached)}) · completion ${formatTokens(usage.completion)} · total ${formatTokens(usage.total)}`;
}

function compact(count) {
  if (count < 1000) return String(count);
  if (count < 1_000_000) return `${trim(count / 1000)}k`;
  return `${trim(count / 1_000_000)}M`;
}

function trim(value) {
  return value >= 100 ? value.toFixed(0) : value.toFixed(1).replace(/\.0$/, "");
}

/** One stacked bar per request that reported usage (cached, other prompt, completion tokens). */
export function tokenChart(layout) {
  const max = Math.max(1, ...layout.tokens.map((entry) => entry.usage.total));
  const bars = layout.tokens.map((entry) => {
    const { prompt, completion, cached, total } = entry.usage;
    const stack = element(
      "div",
      { className: "tl-token-stack" },
      segment("tl-tok-completion", completion),
      segment("tl-tok-prompt", Math.max(0, prompt - cached)),
      segment("tl-tok-cached", Math.min(cached, prompt)),
    );
    stack.style.height = percent(total / max);
    return element(
      "div",
      {
        className: "tl-token",
        "data-testid": "timeline-token-bar",
        "data-iteration": entry.iteration,
        "data-index": entry.index,
        "data-total": total,
        title: `request ${entry.index + 1} (iteration ${entry.iteration})\n${usageText(entry.usage)}`,
      },
      element("span", { className: "tl-token-value" }, compact(total)),
      element("div", { className: "tl-token-column" }, stack),
      element("span", { className: "tl-token-label" }, `i${entry.iteration}`),
    );
  });
  return element(
    "div",
    { className: "tl-tokens", "data-testid": "timeline-tokens" },
    element(
      "div",
      { className: "tl-foot-title" },
      "tokens per request",
      element(
        "span",
        { className: "tl-token-keys" },
        key("tl-tok-cached", "cached"),
        key("tl-tok-prompt", "prompt"),
        key("tl-tok-completion", "completion"),
      ),
    ),
    bars.length > 0
      ? element("div", { className: "tl-token-bars" }, ...bars)
      : element("p", { className: "timeline-empty" }, "no usage reported yet"),
  );
}

function key(className, text) {
  return element(
    "span",
    { className: "tl-legend-item" },
    element("span", { className: `tl-swatch ${className}` }),
    text,
  );
}

function segment(className, value) {
  const node = element("div", { className });
  node.style.flexGrow = String(value);
  return node;
}

/** The context's size against its limit, with the compaction threshold marked. */
export function contextGauge(layout) {
  const { tokenUsed, tokenLimit, ratio, threshold } = layout.context;
  const level =
    ratio === null ? "unknown" : ratio >= threshold ? "over" : ratio >= threshold * 0.8 ? "near" : "ok";
  const fill = element("div", { className: "tl-gauge-fill" });
  fill.style.width = percent(Math.min(1, ratio ?? 0));
  const mark = element("div", {
    className: "tl-gauge-threshold",
    title: `compacted after a chat at ${Math.round(threshold * 100)}%`,
  });
  mark.style.left = percent(Math.min(1, threshold));
  const text =
    ratio === null
      ? tokenUsed === null
        ? "no context size reported yet"
        : `${formatTokens(tokenUsed)} tokens (no token limit in the events)`
      : `${formatTokens(tokenUsed)} / ${formatTokens(tokenLimit)} tokens · ${(ratio * 100).toFixed(1)}% · compacts at ${Math.round(threshold * 100)}%`;
  return element(
    "div",
    {
      className: "tl-gauge",
      "data-testid": "timeline-gauge",
      "data-level": level,
      "data-ratio": ratio === null ? "" : String(ratio),
      "data-threshold": String(threshold),
    },
    element("div", { className: "tl-foot-title" }, "context"),
    element("div", { className: "tl-gauge-track" }, fill, mark),
    element("div", { className: "tl-gauge-text", "data-testid": "timeline-gauge-text" }, text),
  );
}
