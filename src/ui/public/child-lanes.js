// The sub-agent lanes of one session: what the chats its `ask_agent` calls asked are doing, built
// from the session's own events, so a session opened after the fact shows what was shown live.
// Plain data, no DOM: the transcript (transcript-view.js), the timeline (timeline-model.js) and
// the unit tests (test/ui/child-lanes.test.ts) share it. Typed in child-lanes.d.ts.
//
// What it reads:
// - ToolCallProgress (on the asking session, one per step of an asked chat or of a chat that one
//   asked in turn; `toolCallId` is this session's `ask_agent` call, `source` the chat that made the
//   step): a lane per source chat, holding its text (coalesced by the host) and its tool steps;
// - ToolApprovalRequested / ToolApprovalResolved with `heldBy` (the root's copy of a call held
//   further down): the held step of the holder's lane, decidable from this session;
// - the asking chat's end (ChatCompleted / ChatFailed): lanes still open end with it (its asked
//   chats are stopped with it, and their last steps may never be relayed).
//
// Nesting: a chat asked by a chat further down reports its steps through the same tool call, each
// naming its `asker` (the chat and `ask_agent` call that asked it): it nests under that step. A
// step from a host that does not name it is placed from its session's name: `ask_agent` asks
// `<asker agent>-<asker session>` (cut to 64 characters with a hash), so it nests under the running
// `ask_agent` step of the lane whose agent and session give that name and that has no running lane
// yet; otherwise it is a lane of the tool call itself (the asked chat, or another attempt of it).

/** The tool whose steps may hold lanes of their own. */
export const ASK_AGENT_TOOL = "ask_agent";

/** The longest session name; longer `<agent>-<session>` names are cut and end in a 12-digit hash. */
const MAX_NAME = 64;
const HASH_LENGTH = 12;

/** Whether `session` is the session `ask_agent` of `agent`/`askerSession` asks (the name it derives). */
export function isAskedSessionOf(agent, askerSession, session) {
  const name = `${agent}-${askerSession}`;
  if (name.length <= MAX_NAME) return session === name;
  const kept = name.slice(0, MAX_NAME - HASH_LENGTH - 1);
  return session.length === MAX_NAME && session.startsWith(`${kept}-`);
}

/** The key of a tool call of the viewed session: a provider may reuse a call id in another chat. */
export function callKeyOf(chatId, toolCallId) {
  return `${chatId}/${toolCallId}`;
}

const ENDED_STEP_STATUS = new Set(["completed", "failed", "denied", "cancelled"]);

export class ChildLanes {
  constructor() {
    /** Source chatId → lane, in the order they appeared. */
    this.lanes = new Map();
    /** Call key of the viewed session's tool call → the chatIds of its own lanes, in order. */
    this.byCall = new Map();
  }

  /**
   * Folds one event of the viewed session in. Returns the lanes it changed (empty when it changed
   * none); an approval with `heldBy` whose holder has no lane yet changes none (the page shows it
   * on its own).
   */
  apply(event) {
    if (!event || typeof event.kind !== "string" || typeof event.chatId !== "string") return [];
    const ms = Date.parse(event.ts);
    const at = Number.isFinite(ms) ? ms : null;
    switch (event.kind) {
      case "ToolCallProgress":
        return this.progress(event, at);
      case "ToolApprovalRequested":
      case "ToolApprovalResolved":
        return this.bubbled(event, at);
      case "ToolCallCompleted":
      case "ToolCallFailed":
        return this.callEnded(event, at);
      case "ChatCompleted":
      case "ChatFailed":
        return this.askerEnded(event, at);
      default:
        return [];
    }
  }

  /** The lane of a source chat, if any of its steps was seen. */
  get(chatId) {
    return this.lanes.get(chatId);
  }

  /** The lanes of the viewed session's tool call (the chats it asked itself), in order. */
  lanesOf(chatId, toolCallId) {
    return (this.byCall.get(callKeyOf(chatId, toolCallId)) ?? []).map((id) => this.lanes.get(id));
  }

  /** Every lane under the viewed chat's tool calls, depth first (a lane, then the lanes under it). */
  treeOf(chatId) {
    const ordered = [];
    const visit = (lane) => {
      ordered.push(lane);
      for (const item of lane.items) {
        if (item.kind === "tool") for (const id of item.lanes) visit(this.lanes.get(id));
      }
    };
    for (const [key, ids] of this.byCall) {
      if (!key.startsWith(`${chatId}/`)) continue;
      for (const id of ids) visit(this.lanes.get(id));
    }
    return ordered;
  }

  progress(event, ms) {
    const source = event.source;
    if (!source || typeof source.chatId !== "string" || typeof event.toolCallId !== "string") return [];
    const lane = this.laneOf(event, source, ms);
    const changed = [lane];
    if (ms !== null) lane.lastMs = Math.max(lane.lastMs ?? ms, ms);
    const toolName = typeof event.tool === "string" ? event.tool : "tool";
    const stepId = typeof event.sourceToolCallId === "string" ? event.sourceToolCallId : undefined;
    // The holder's own step for a call whose root copy came first: the text before it is in place.
    if (stepId !== undefined) {
      const known = lane.steps.get(stepId);
      if (known) known.isAheadOfItsStep = false;
    }
    switch (event.step) {
      case "chat_started":
        if (ms !== null) lane.startMs = lane.startMs === null ? ms : Math.min(lane.startMs, ms);
        break;
      case "text": {
        const text = typeof event.text === "string" ? event.text : "";
        // The root's copy of a held call comes before the text the holder streamed just before it
        // (that text is relayed with the approval's own step): the text goes before such a step.
        let at = lane.items.length;
        while (at > 0 && lane.items[at - 1].isAheadOfItsStep) at--;
        const before = lane.items[at - 1];
        if (before && before.kind === "text") before.text += text;
        else lane.items.splice(at, 0, { kind: "text", text });
        break;
      }
      case "tool_started": {
        const step = this.stepOf(lane, stepId, toolName, ms);
        step.status = "running";
        break;
      }
      case "tool_completed":
      case "tool_failed": {
        const step = this.stepOf(lane, stepId, toolName, ms);
        step.status = event.step === "tool_failed" ? "failed" : "completed";
        step.error = event.step === "tool_failed" && typeof event.text === "string" ? event.text : null;
        step.endMs = ms;
        break;
      }
      case "approval_requested": {
        const step = this.stepOf(lane, stepId, toolName, ms);
        requestApproval(step, event.arguments, false);
        break;
      }
      case "approval_resolved": {
        const step = this.stepOf(lane, stepId, toolName, ms);
        resolveApproval(step, event.approved === true, null);
        break;
      }
      case "chat_completed":
      case "chat_failed":
        endLane(lane, ms, event.step === "chat_completed" ? "completed" : "failed", event.text);
        break;
      default:
        break;
    }
    // A step of a nested chat moves its ancestors' lanes too (their "last seen" and their drawing).
    for (let above = this.parentLane(lane); above; above = this.parentLane(above)) {
      if (ms !== null) above.lastMs = Math.max(above.lastMs ?? ms, ms);
      changed.push(above);
    }
    return changed;
  }

  /** A copy of a held call on the root's session: the holder's step, decidable from here. */
  bubbled(event, ms) {
    const holder = event.heldBy;
    if (!holder || typeof holder.chatId !== "string") return [];
    const lane = this.lanes.get(holder.chatId);
    if (!lane) return [];
    const toolName = typeof event.toolName === "string" ? event.toolName : "tool";
    const isNew = !lane.steps.has(String(event.toolCallId));
    const step = this.stepOf(lane, event.toolCallId, toolName, ms);
    if (isNew) step.isAheadOfItsStep = true;
    if (event.kind === "ToolApprovalRequested") {
      requestApproval(step, event.arguments, true);
      step.approval.request = {
        agent: event.agent,
        session: event.session,
        toolCallId: event.toolCallId,
        arguments: typeof event.arguments === "string" ? event.arguments : "",
      };
    } else {
      resolveApproval(step, event.approved === true, typeof event.reason === "string" ? event.reason : null);
    }
    return [lane];
  }

  /**
   * The asking tool call ended: its lanes still open end with it (the answer came, or the call
   * failed and its asked chat was stopped), whether or not their own end was relayed in time.
   */
  callEnded(event, ms) {
    const changed = [];
    const status = event.kind === "ToolCallCompleted" ? "completed" : "cancelled";
    const visit = (lane) => {
      if (lane.status === "running") {
        endLane(lane, ms, status, null);
        changed.push(lane);
      }
      for (const item of lane.items) {
        if (item.kind === "tool") for (const id of item.lanes) visit(this.lanes.get(id));
      }
    };
    for (const lane of this.lanesOf(event.chatId, String(event.toolCallId))) visit(lane);
    return changed;
  }

  /** The asking chat ended: its lanes still open end with it, and nothing can be decided there. */
  askerEnded(event, ms) {
    const status = event.kind === "ChatCompleted" ? "completed" : event.cancelled ? "cancelled" : "failed";
    const changed = [];
    for (const lane of this.treeOf(event.chatId)) {
      let isChanged = false;
      if (lane.status === "running") {
        endLane(lane, ms, status === "completed" ? "completed" : "cancelled", null);
        isChanged = true;
      }
      for (const item of lane.items) {
        if (item.kind === "tool" && item.approval?.pending) {
          item.approval.pending = false;
          item.status = "cancelled";
          isChanged = true;
        }
      }
      if (isChanged) changed.push(lane);
    }
    return changed;
  }

  parentLane(lane) {
    return lane.parent ? this.lanes.get(lane.parent.chatId) : undefined;
  }

  laneOf(event, source, ms) {
    const known = this.lanes.get(source.chatId);
    if (known) return known;
    const callKey = callKeyOf(event.chatId, event.toolCallId);
    const lane = {
      chatId: source.chatId,
      agent: String(source.agent ?? "?"),
      session: String(source.session ?? "?"),
      callKey,
      parent: null,
      depth: 1,
      status: "running",
      error: null,
      startMs: null,
      endMs: null,
      lastMs: ms,
      items: [],
      steps: new Map(),
    };
    const asker = this.namedAsker(callKey, event.asker) ?? this.askerOf(callKey, lane.session);
    if (asker) {
      lane.parent = { chatId: asker.lane.chatId, toolCallId: asker.step.toolCallId };
      lane.depth = asker.lane.depth + 1;
      asker.step.lanes.push(lane.chatId);
    } else {
      const own = this.byCall.get(callKey) ?? [];
      own.push(lane.chatId);
      this.byCall.set(callKey, own);
    }
    this.lanes.set(lane.chatId, lane);
    return lane;
  }

  /** The step a relayed step names as its source's asker, when its lane under this tool call is known. */
  namedAsker(callKey, asker) {
    if (!asker || typeof asker.chatId !== "string" || typeof asker.toolCallId !== "string") return undefined;
    const lane = this.lanes.get(asker.chatId);
    const step = lane?.callKey === callKey ? lane.steps.get(asker.toolCallId) : undefined;
    return step ? { lane, step } : undefined;
  }

  /** The running `ask_agent` step, under this tool call, that asked `session` (see the nesting rule). */
  askerOf(callKey, session) {
    for (const lane of this.lanes.values()) {
      if (lane.callKey !== callKey || !isAskedSessionOf(lane.agent, lane.session, session)) continue;
      for (const item of lane.items) {
        if (item.kind !== "tool" || item.toolName !== ASK_AGENT_TOOL || item.status !== "running") continue;
        const isBusy = item.lanes.some((id) => this.lanes.get(id)?.status === "running");
        if (!isBusy) return { lane, step: item };
      }
    }
    return undefined;
  }

  stepOf(lane, toolCallId, toolName, ms) {
    const id = toolCallId === undefined ? `step-${lane.items.length}` : String(toolCallId);
    let step = lane.steps.get(id);
    if (!step) {
      step = {
        kind: "tool",
        toolCallId: id,
        toolName,
        status: "running",
        error: null,
        startMs: ms,
        endMs: null,
        approval: null,
        lanes: [],
        isAheadOfItsStep: false,
      };
      lane.steps.set(id, step);
      lane.items.push(step);
    }
    return step;
  }
}

function requestApproval(step, args, isDecidable) {
  if (step.approval && !step.approval.pending) return; // decided already (a replay overlap)
  step.approval ??= { arguments: "", pending: true, approved: null, reason: null, decidable: false };
  if (typeof args === "string" && args !== "") step.approval.arguments = args;
  step.approval.decidable ||= isDecidable;
  step.status = "awaiting-approval";
}

function resolveApproval(step, approved, reason) {
  step.approval ??= { arguments: "", pending: false, approved: null, reason: null, decidable: false };
  step.approval.pending = false;
  step.approval.approved = approved;
  if (reason !== null) step.approval.reason = reason;
  // An approved call runs next (its tool_started may already have come: keep what it says).
  if (step.status === "awaiting-approval") step.status = approved ? "approved" : "denied";
}

function endLane(lane, ms, status, error) {
  if (lane.status !== "running") return;
  lane.status = status;
  lane.endMs = ms;
  lane.error = typeof error === "string" && error !== "" ? error : null;
  for (const item of lane.items) {
    if (item.kind !== "tool" || ENDED_STEP_STATUS.has(item.status)) continue;
    if (item.status === "approved" && status === "completed") continue;
    item.status = status === "completed" ? "completed" : "cancelled";
    item.endMs ??= ms;
    if (item.approval) item.approval.pending = false;
  }
}
