import { EVENT_BODY_SCHEMAS } from "../events/event-schemas.js";
import type { AgentEvent, UnknownEvent } from "../events/types.js";
import { truncateText } from "../text/truncate-text.js";

/** ANSI styles, or none when the output is not a terminal. */
export interface Palette {
  dim(text: string): string;
  bold(text: string): string;
  red(text: string): string;
  green(text: string): string;
  yellow(text: string): string;
  cyan(text: string): string;
  magenta(text: string): string;
}

const wrap = (open: number, close: number) => (text: string) => `\u001b[${open}m${text}\u001b[${close}m`;
const identity = (text: string) => text;

export function createPalette(color: boolean): Palette {
  if (!color) {
    return {
      dim: identity,
      bold: identity,
      red: identity,
      green: identity,
      yellow: identity,
      cyan: identity,
      magenta: identity,
    };
  }
  return {
    dim: wrap(2, 22),
    bold: wrap(1, 22),
    red: wrap(31, 39),
    green: wrap(32, 39),
    yellow: wrap(33, 39),
    cyan: wrap(36, 39),
    magenta: wrap(35, 39),
  };
}

/** One line of text for the terminal: newlines shown as ⏎, long values cut. */
export function oneLine(text: string, max = 160): string {
  const flat = text.replace(/\r?\n/g, " ⏎ ");
  return truncateText(flat, max);
}

function usageText(usage: { prompt: number; completion: number; cached: number }): string {
  return `${usage.prompt} in / ${usage.completion} out${usage.cached ? ` (${usage.cached} cached)` : ""}`;
}

function stateText(state: unknown): string {
  if (typeof state === "string") return state;
  if (state && typeof state === "object") {
    return Object.entries(state as Record<string, unknown>)
      .map(([key, child]) => `${key}.${stateText(child)}`)
      .join(",");
  }
  return String(state);
}

/**
 * The part of the line after the header that says what happened. Never throws: anything may be
 * published on the event subjects, and an event whose kind-specific fields are missing or of the
 * wrong type (another service's, a newer or older host's) is shown as its JSON instead, and so is an
 * event of a kind newer than this version.
 */
export function describeEvent(event: AgentEvent | UnknownEvent, palette: Palette): string {
  if (Object.hasOwn(EVENT_BODY_SCHEMAS, event.kind)) {
    try {
      return describeKnownEvent(event as AgentEvent, palette);
    } catch {
      // Shown as its JSON below.
    }
  }
  const { kind: _kind, agent: _agent, session: _session, seq: _seq, ts: _ts, ...rest } = event;
  return palette.dim(oneLine(JSON.stringify(rest) ?? "", 200));
}

function describeKnownEvent(event: AgentEvent, palette: Palette): string {
  switch (event.kind) {
    case "ChatStarted":
      return `${palette.bold("user")} ${oneLine(event.text)}`;
    case "ModelRequest":
      return `request${event.final ? " (final, no tools)" : ""} · ${event.messageCount} messages`;
    case "ModelStreamSegmentStart":
      return `segment ${event.attempt}`;
    case "ModelStreamSegmentReset":
      return palette.yellow(
        `reset segment ${event.attempt}: ${event.reason} (${oneLine(event.error.message, 100)})`,
      );
    case "ModelTextDelta":
      return JSON.stringify(event.delta);
    case "ModelReasoningDelta":
      return palette.dim(JSON.stringify(event.delta));
    case "ModelResponse":
      return `${event.purpose === "compaction" ? "summary" : "response"} · ${usageText(event.usage)}`;
    case "ToolCallStarted":
      return `${palette.cyan(event.toolName)}(${oneLine(event.arguments, 120)}) ${palette.dim(event.toolCallId)}`;
    case "ToolCallCompleted":
      return `${palette.cyan(event.toolName)} → ${oneLine(event.result, 120)} ${palette.dim(`${event.durationMs} ms`)}`;
    case "ToolCallFailed":
      return palette.red(`${event.toolName} failed: ${oneLine(event.error.message, 120)}`);
    case "ToolCallProgress":
      return `${palette.cyan(event.toolName)} ${palette.dim(event.toolCallId)} ← ${palette.magenta(`${event.source.agent}/${event.source.session}`)} ${progressText(event, palette)}`;
    case "ToolApprovalRequested":
      return palette.yellow(
        `approve ${event.toolName}(${oneLine(event.arguments, 120)})? ${palette.dim(event.toolCallId)}${event.heldBy === undefined ? "" : ` held by ${event.heldBy.agent}/${event.heldBy.session}`}`,
      );
    case "ToolApprovalResolved":
      return `${event.toolName} ${event.approved ? palette.green("approved") : palette.red("denied")}${event.reason ? `: ${oneLine(event.reason, 120)}` : ""} ${palette.dim(event.toolCallId)}${event.heldBy === undefined ? "" : ` held by ${event.heldBy.agent}/${event.heldBy.session}`}`;
    case "ChatResumed":
      return `${palette.yellow("resumed")} at ${event.step}${event.fromIteration > 0 ? ` (iteration ${event.fromIteration})` : ""}`;
    case "ToolCallInDoubt":
      return `${palette.yellow("in doubt")} ${event.toolName}(${oneLine(event.arguments, 120)}) ${palette.dim(event.toolCallId)}`;
    case "ContextCompaction":
      return `compaction ${event.phase}${event.topic ? ` (${event.topic})` : ""}${event.error ? `: ${event.error.message}` : ""}`;
    case "ChatCompleted":
      return `${palette.green("done")} ${oneLine(event.result, 120)} · ${usageText(event.usage)}`;
    case "ChatFailed":
      return palette.red(
        `${event.cancelled ? "cancelled" : "failed"}: ${event.error.name ?? event.error.code}: ${oneLine(event.error.message, 120)}`,
      );
    case "StateChanged":
      return palette.dim(`${event.machine} → ${stateText(event.state)}`);
  }
}

function progressText(event: Extract<AgentEvent, { kind: "ToolCallProgress" }>, palette: Palette): string {
  const tool = event.tool === undefined ? "" : `${palette.cyan(event.tool)} `;
  const text = event.text === undefined ? "" : oneLine(event.text, 120);
  if (event.step === "text") return JSON.stringify(text);
  if (event.step.endsWith("failed")) return palette.red(`${event.step} ${tool}${text}`);
  return `${event.step} ${tool}${text}`.trimEnd();
}

/**
 * `12:04:05.123 bot/s42 #17 i1 ToolCallStarted current_time({}) call_1`; with `depth` above 0 (a
 * chat another agent asked), indented that many steps under the line of the call that asked.
 */
export function formatEventLine(
  event: AgentEvent | UnknownEvent,
  palette: Palette = createPalette(false),
  depth = 0,
): string {
  const time =
    typeof event.ts === "string" && event.ts.length >= 23 ? event.ts.slice(11, 23) : String(event.ts);
  const where = palette.magenta(`${event.agent}/${event.session}`);
  const iteration = event.iteration > 0 ? ` i${event.iteration}` : "";
  const indent = depth > 0 ? `${"  ".repeat(depth - 1)}${palette.dim("└ ")}` : "";
  return `${indent}${palette.dim(time)} ${where} ${palette.dim(`#${event.seq}${iteration}`)} ${palette.bold(event.kind)} ${describeEvent(event, palette)}`;
}
