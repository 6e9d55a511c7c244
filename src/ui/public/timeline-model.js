// The chat timeline (waterfall) built from a session's events: plain data, no DOM, so the page
// (timeline-view.js) and the unit tests (test/ui/timeline-model.test.ts) share it. The shapes are
// described in timeline-model.d.ts.
//
// What marks what (the event kinds and the fields each carries):
// - an iteration band: the first to the last event carrying that iteration;
// - a model request: ModelRequest → its end, the request's ModelResponse (purpose "chat", with the
//   request's usage) or, from hosts that do not publish it, the first event that can only come
//   after the stream (the iteration machine leaving `streaming`, a ToolCallStarted, the chat's end);
// - time to first token: ModelRequest → the attempt's ModelStreamSegmentStart (published with the
//   first delta); a ModelStreamSegmentReset ends an attempt and starts the next one;
// - a tool call: ToolCallStarted → ToolCallCompleted / ToolCallFailed, in parallel lanes;
// - a wait, in its own lanes: ContextCompaction started → completed / failed (kind "compaction");
//   ToolApprovalRequested → the ToolApprovalResolved with the same toolCallId, or the chat's end
//   when it was never resolved (kind "approval"; a call held further down the agent tree names its
//   holder, `heldBy`);
// - a sub-agent's span, nested under the `ask_agent` call that asked it: the asked chat's
//   ToolCallProgress steps on this session (child-lanes.js), its tool steps inside it.

import { ChildLanes } from "./child-lanes.js";

/** Where the context is compacted when the events do not say (the agent's contextCompactRatio, 0.7 by default). */
export const DEFAULT_COMPACT_RATIO = 0.7;

/** The iteration machine's states that end an iteration. */
const FINAL_ITERATION_STATES = new Set(["answered", "toolsDone", "failed"]);

export class TimelineModel {
  constructor() {
    /** chatId → chat timeline, in the order the chats first appeared. */
    this.chats = new Map();
    /** The chats this session's `ask_agent` calls asked, as the transcript shows them. */
    this.lanes = new ChildLanes();
  }

  /**
   * Folds one event in. Returns the chat timeline it changed, or undefined for events that belong
   * to no chat (session-level events have chatId "") or that are not events at all.
   */
  apply(event) {
    if (!event || typeof event.kind !== "string" || typeof event.chatId !== "string") return undefined;
    if (event.chatId === "") return undefined;
    const ms = Date.parse(event.ts);
    if (!Number.isFinite(ms)) return undefined;
    const chat = this.chatOf(event.chatId, ms);
    chat.lastMs = Math.max(chat.lastMs, ms);
    // Lanes change in place; the tree's shape only when a lane is added.
    const laneCount = this.lanes.lanes.size;
    if (this.lanes.apply(event).length > 0 && this.lanes.lanes.size !== laneCount) {
      chat.children = this.lanes.treeOf(chat.chatId);
    }
    const iteration = Number.isInteger(event.iteration) ? event.iteration : 0;
    if (iteration > 0 && !(event.kind === "ModelResponse" && event.purpose === "compaction")) {
      touchBand(chat, iteration, ms);
    }
    switch (event.kind) {
      case "ChatStarted":
        chat.text = typeof event.text === "string" ? event.text : "";
        chat.startMs = Math.min(chat.startMs, ms);
        setContext(chat, event);
        if (typeof event.contextCompactRatio === "number")
          chat.context.compactRatio = event.contextCompactRatio;
        break;
      case "ModelRequest":
        startRequest(chat, iteration, ms, event.final === true);
        break;
      case "ModelStreamSegmentStart": {
        const request = streamingRequestOf(chat, iteration, ms);
        if (request) markFirstToken(request, attemptOf(request, event.attempt, ms), ms);
        break;
      }
      case "ModelTextDelta":
      case "ModelReasoningDelta": {
        const request = streamingRequestOf(chat, iteration, ms);
        if (request) markFirstToken(request, request.attempts[request.attempts.length - 1], ms);
        break;
      }
      case "ModelStreamSegmentReset": {
        const request = streamingRequestOf(chat, iteration, ms);
        if (!request) break;
        const attempt = attemptOf(request, event.attempt, ms);
        attempt.endMs = ms;
        attempt.reset = { ms, reason: String(event.reason ?? ""), error: event.error ?? null };
        request.attempts.push(newAttempt(attempt.attempt + 1, ms));
        break;
      }
      case "ModelResponse":
        if (event.purpose === "compaction") {
          const wait = openWait(chat, "compaction");
          if (wait) wait.usage = event.usage ?? null;
        } else {
          const request = requestOf(chat, iteration, ms);
          finishRequest(request, ms, "completed");
          request.usage = event.usage ?? null;
          request.toolCalls = typeof event.toolCalls === "number" ? event.toolCalls : null;
          if (event.usage) chat.context.tokenUsed = event.usage.prompt + event.usage.completion;
        }
        break;
      case "ToolCallStarted":
        finishOpenRequest(chat, iteration, ms, "completed");
        startTool(chat, event, iteration, ms);
        break;
      case "ToolCallCompleted":
      case "ToolCallFailed":
        settleTool(chat, event, iteration, ms);
        break;
      case "ToolApprovalRequested":
        approvalRequested(chat, event, ms);
        break;
      case "ToolApprovalResolved":
        approvalResolved(chat, event, ms);
        break;
      case "ContextCompaction":
        compaction(chat, event, ms);
        break;
      case "StateChanged":
        if (event.machine === "iteration" && iteration > 0 && typeof event.state === "string") {
          if (event.state !== "streaming") {
            finishOpenRequest(chat, iteration, ms, event.state === "failed" ? "failed" : "completed");
          }
          if (FINAL_ITERATION_STATES.has(event.state)) {
            const band = chat.iterations.find((candidate) => candidate.iteration === iteration);
            if (band) band.isOpen = false;
          }
        }
        break;
      case "ChatCompleted":
        setContext(chat, event);
        chat.usage = event.usage ?? null;
        endChat(chat, ms, "completed", null);
        break;
      case "ChatFailed":
        endChat(chat, ms, event.cancelled ? "cancelled" : "failed", event.error ?? null);
        break;
      default:
        break;
    }
    return chat;
  }

  /** The chat timeline of `chatId`, if any of its events was seen. */
  get(chatId) {
    return this.chats.get(chatId);
  }

  /** The chat whose first event came last (the one to follow live), if any. */
  latest() {
    let last;
    for (const chat of this.chats.values()) last = chat;
    return last;
  }

  chatOf(chatId, ms) {
    let chat = this.chats.get(chatId);
    if (!chat) {
      chat = {
        chatId,
        text: null,
        startMs: ms,
        lastMs: ms,
        endMs: null,
        status: "running",
        error: null,
        usage: null,
        iterations: [],
        requests: [],
        tools: [],
        waits: [],
        context: { tokenUsed: null, tokenLimit: null, compactRatio: DEFAULT_COMPACT_RATIO },
        toolLanes: [],
        waitLanes: [],
        children: [],
      };
      this.chats.set(chatId, chat);
    }
    return chat;
  }
}

function touchBand(chat, iteration, ms) {
  let band = chat.iterations[chat.iterations.length - 1];
  if (!band || band.iteration !== iteration) {
    band = chat.iterations.find((candidate) => candidate.iteration === iteration);
  }
  if (!band) {
    for (const other of chat.iterations) other.isOpen = false;
    band = { iteration, startMs: ms, endMs: ms, isOpen: true, final: false };
    chat.iterations.push(band);
  }
  band.endMs = Math.max(band.endMs, ms);
  return band;
}

function setContext(chat, event) {
  if (typeof event.tokenUsed === "number") chat.context.tokenUsed = event.tokenUsed;
  if (typeof event.tokenLimit === "number") chat.context.tokenLimit = event.tokenLimit;
}

function newAttempt(attempt, ms) {
  return { attempt, startMs: ms, firstTokenMs: null, endMs: null, reset: null };
}

function startRequest(chat, iteration, ms, isFinal) {
  const previous = chat.requests[chat.requests.length - 1];
  if (previous) finishRequest(previous, ms, "completed");
  const request = {
    index: chat.requests.length,
    iteration,
    final: isFinal,
    startMs: ms,
    firstTokenMs: null,
    endMs: null,
    status: "running",
    attempts: [newAttempt(1, ms)],
    usage: null,
    toolCalls: null,
  };
  chat.requests.push(request);
  if (isFinal) {
    const band = chat.iterations.find((candidate) => candidate.iteration === iteration);
    if (band) {
      band.final = true;
      band.isOpen = true;
    }
  } else {
    // A context overflow re-runs the same iteration after compacting: its band is live again.
    const band = chat.iterations.find((candidate) => candidate.iteration === iteration);
    if (band) band.isOpen = true;
  }
  return request;
}

/** The iteration's running request; one started here when its ModelRequest was not seen. */
function requestOf(chat, iteration, ms) {
  const last = chat.requests[chat.requests.length - 1];
  if (last && last.iteration === iteration && last.endMs === null) return last;
  return startRequest(chat, iteration, ms, false);
}

/**
 * The request a stream event belongs to: the iteration's running request; a new one only when the
 * iteration has none yet (a replay that begins mid-stream), never a second one for stray deltas.
 */
function streamingRequestOf(chat, iteration, ms) {
  const last = chat.requests[chat.requests.length - 1];
  if (last && last.iteration === iteration) return last.endMs === null ? last : undefined;
  if (chat.requests.some((request) => request.iteration === iteration)) return undefined;
  return startRequest(chat, iteration, ms, false);
}

function finishOpenRequest(chat, iteration, ms, status) {
  const last = chat.requests[chat.requests.length - 1];
  if (last && last.iteration === iteration) finishRequest(last, ms, status);
}

function finishRequest(request, ms, status) {
  if (request.endMs !== null) return;
  request.endMs = ms;
  request.status = status;
  const attempt = request.attempts[request.attempts.length - 1];
  if (attempt && attempt.endMs === null) attempt.endMs = ms;
}

function attemptOf(request, number, ms) {
  const wanted = Number.isInteger(number) && number > 0 ? number : request.attempts.length;
  let attempt = request.attempts.find((candidate) => candidate.attempt === wanted);
  if (!attempt) {
    attempt = newAttempt(wanted, ms);
    request.attempts.push(attempt);
  }
  return attempt;
}

function markFirstToken(request, attempt, ms) {
  if (attempt && attempt.firstTokenMs === null) attempt.firstTokenMs = ms;
  if (request.firstTokenMs === null) request.firstTokenMs = ms;
}

/** The lowest lane free at `ms` (its last item ended by then); `lanes` holds each lane's last item. */
function allocateLane(lanes, item) {
  let lane = lanes.findIndex((last) => last.endMs !== null && last.endMs <= item.startMs);
  if (lane < 0) lane = lanes.length;
  lanes[lane] = item;
  return lane;
}

function startTool(chat, event, iteration, ms) {
  const tool = {
    toolCallId: String(event.toolCallId ?? ""),
    toolName: String(event.toolName ?? "tool"),
    iteration,
    startMs: ms,
    endMs: null,
    durationMs: null,
    status: "running",
    error: null,
    lane: 0,
  };
  tool.lane = allocateLane(chat.toolLanes, tool);
  chat.tools.push(tool);
  return tool;
}

function settleTool(chat, event, iteration, ms) {
  let tool = chat.tools.find(
    (candidate) => candidate.toolCallId === event.toolCallId && candidate.endMs === null,
  );
  if (!tool) {
    // Its start was not seen (a replay that begins mid-chat): the duration says when it started.
    const durationMs = typeof event.durationMs === "number" ? event.durationMs : 0;
    tool = startTool(chat, event, iteration, ms - durationMs);
    chat.startMs = Math.min(chat.startMs, tool.startMs);
  }
  tool.endMs = ms;
  tool.durationMs = typeof event.durationMs === "number" ? event.durationMs : ms - tool.startMs;
  tool.status = event.kind === "ToolCallFailed" ? "failed" : "completed";
  tool.error = event.kind === "ToolCallFailed" ? (event.error ?? null) : null;
}

/** Starts a wait of `kind` (compaction, approval) in the first free wait lane. */
export function startWait(chat, kind, ms, details = {}) {
  const wait = { kind, startMs: ms, endMs: null, status: "running", lane: 0, usage: null, ...details };
  wait.lane = allocateLane(chat.waitLanes, wait);
  chat.waits.push(wait);
  return wait;
}

/** The latest running wait of `kind`, if any. */
export function openWait(chat, kind) {
  for (let index = chat.waits.length - 1; index >= 0; index--) {
    const wait = chat.waits[index];
    if (wait.kind === kind && wait.endMs === null) return wait;
  }
  return undefined;
}

function compaction(chat, event, ms) {
  if (event.phase === "started") {
    startWait(chat, "compaction", ms, { topic: event.topic ?? null, tokenUsed: null, error: null });
    return;
  }
  const wait =
    openWait(chat, "compaction") ?? startWait(chat, "compaction", ms, { topic: null, error: null });
  wait.endMs = ms;
  wait.status = event.phase === "failed" ? "failed" : "completed";
  if (event.error) wait.error = event.error;
  if (typeof event.tokenUsed === "number") {
    wait.tokenUsed = event.tokenUsed;
    if (event.phase === "completed") chat.context.tokenUsed = event.tokenUsed;
  }
  // A manual compaction is a chat of its own (no ChatStarted): it ends with the compaction.
  if (chat.text === null && chat.requests.length === 0) {
    endChat(chat, ms, wait.status, wait.error ?? null);
  }
}

/** The running approval wait of `toolCallId`, if any. */
function openApproval(chat, toolCallId) {
  return chat.waits.find(
    (wait) => wait.kind === "approval" && wait.endMs === null && wait.toolCallId === toolCallId,
  );
}

function approvalRequested(chat, event, ms) {
  const toolCallId = String(event.toolCallId ?? "");
  if (openApproval(chat, toolCallId)) return; // the same request seen twice (a replay overlap)
  startWait(chat, "approval", ms, {
    toolName: String(event.toolName ?? "tool"),
    toolCallId,
    approved: null,
    reason: null,
    heldBy: heldByOf(event),
  });
}

function approvalResolved(chat, event, ms) {
  const toolCallId = String(event.toolCallId ?? "");
  // Its request was not seen (a replay that begins mid-wait): the decision still shows, at `ms`.
  const wait =
    openApproval(chat, toolCallId) ??
    startWait(chat, "approval", ms, {
      toolName: String(event.toolName ?? "tool"),
      toolCallId,
      approved: null,
      reason: null,
      heldBy: heldByOf(event),
    });
  wait.endMs = ms;
  wait.status = "completed";
  wait.approved = event.approved === true;
  wait.reason = typeof event.reason === "string" && event.reason !== "" ? event.reason : null;
}

/** The session further down the agent tree that holds a call (its copy on the root), or null. */
function heldByOf(event) {
  const holder = event.heldBy;
  if (!holder || typeof holder.agent !== "string" || typeof holder.session !== "string") return null;
  return { agent: holder.agent, session: holder.session };
}

function endChat(chat, ms, status, error) {
  chat.endMs = ms;
  chat.status = status;
  chat.error = error;
  const leftover = status === "completed" ? "completed" : status;
  for (const request of chat.requests) finishRequest(request, ms, leftover);
  for (const tool of chat.tools) {
    if (tool.endMs !== null) continue;
    tool.endMs = ms;
    tool.durationMs = ms - tool.startMs;
    tool.status = leftover === "completed" ? "completed" : "cancelled";
  }
  for (const wait of chat.waits) {
    if (wait.endMs !== null) continue;
    wait.endMs = ms;
    wait.status = leftover === "completed" ? "completed" : "cancelled";
  }
  for (const band of chat.iterations) band.isOpen = false;
}
