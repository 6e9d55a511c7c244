// Small DOM and formatting helpers for the page.

/** `element("div", { className, "data-testid": … }, child, …)`: children are nodes or text. */
export function element(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === undefined || value === null) continue;
    if (name === "className") node.className = value;
    else node.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === undefined || child === null) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/** Local wall-clock time of an ISO timestamp (24 h). */
export function formatTime(ts) {
  const date = new Date(ts);
  if (Number.isNaN(date.getTime())) return "";
  return date.toLocaleTimeString([], { hour12: false });
}

/** Indented JSON when `text` is a JSON object or array, else `text` as it is. */
export function prettyJson(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  try {
    const value = JSON.parse(text);
    return typeof value === "object" && value !== null ? JSON.stringify(value, null, 2) : text;
  } catch {
    return text;
  }
}

/** One line of token usage. */
export function formatUsage(usage) {
  if (!usage) return "";
  return `tokens: prompt ${usage.prompt} · completion ${usage.completion} · total ${usage.total} · cached ${usage.cached}`;
}
