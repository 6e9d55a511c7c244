// The transcript of one session, built event by event (a reset segment's text is discarded: the model is asked again and its retry replaces it).
import { ChildLanes, callKeyOf } from "./child-lanes.js";
import { element, formatUsage, prettyJson } from "./dom.js";

/** Tool calls by chat: a provider may reuse a call id in another chat. */
function toolKey(event) {
  return callKeyOf(event.chatId, event.toolCallId);
}

export class TranscriptView {
  /**
   * @param {HTMLElement} root
   * @param {{ decide?: (request: object, command: "approve" | "deny") => void }} [options]
   *   `decide` sends the Approve / Deny of a tool call held for approval.
   * @param {{ openSession?: (agent: string, session: string) => void }} [options]
   *   `openSession` opens another session (a sub-agent's, from its lane).
   */
  constructor(root, options = {}) {
    this.root = root;
    this.decide = options.decide;
    this.openSession = options.openSession;
    this.chats = new Map();
    this.tools = new Map();
    /** What the chats this session's `ask_agent` calls asked are doing (child-lanes.js). */
    this.lanes = new ChildLanes();
    /** Source chatId → its lane's nodes; lane item → its nodes ({ node, status?, approval? }). */
    this.laneNodes = new Map();
    this.itemNodes = new Map();
    this.stickToBottom = true;
    this.scrollScheduled = false;
    this.lastScrollTop = root.scrollTop;
    // Only the reader moves the view up: text arriving never lowers scrollTop. So moving up stops
    // following and reaching the bottom again resumes it. (Judging by the distance to the bottom
    // alone stopped following when a burst of text landed between our scroll and its event.)
    this.onScroll = () => {
      const top = root.scrollTop;
      if (root.scrollHeight - top - root.clientHeight < 48) this.stickToBottom = true;
      else if (top < this.lastScrollTop - 1) this.stickToBottom = false;
      this.lastScrollTop = top;
    };
    root.addEventListener("scroll", this.onScroll, { passive: true });
    // The timeline above grows as a chat runs and takes height from the transcript: keep the end in view.
    this.resizeObserver = new ResizeObserver(() => this.scroll());
    this.resizeObserver.observe(root);
  }

  dispose() {
    this.root.removeEventListener("scroll", this.onScroll);
    this.resizeObserver.disconnect();
  }

  apply(event) {
    const changedLanes = this.lanes.apply(event);
    const isShownInLane = changedLanes.length > 0 && event.heldBy !== undefined;
    this.applyOwn(event, isShownInLane);
    for (const lane of changedLanes) this.renderLane(lane);
    if (changedLanes.length > 0) this.scroll();
  }

  /** The session's own steps; a copy of a call held further down goes to its lane when it has one. */
  applyOwn(event, isShownInLane) {
    switch (event.kind) {
      case "ChatStarted": {
        const chat = this.chat(event);
        if (!chat.user) {
          chat.user = element(
            "div",
            { className: "message-user", "data-testid": "user-message" },
            event.text,
          );
          chat.node.prepend(chat.user);
          if (event.parent) chat.user.after(this.askedBy(event.parent));
        }
        break;
      }
      case "ModelRequest": {
        const turn = this.turn(event);
        if (event.final) turn.label.textContent = `iteration ${event.iteration} · final answer, no tools`;
        break;
      }
      case "ModelStreamSegmentStart": {
        const turn = this.turn(event);
        turn.segment = this.newSegment(turn, event.attempt);
        break;
      }
      case "ModelTextDelta":
        this.appendText(this.segment(event), "text", event.delta);
        break;
      case "ModelReasoningDelta":
        this.appendText(this.segment(event), "reasoning", event.delta);
        break;
      case "ModelStreamSegmentReset":
        this.reset(event);
        break;
      case "ModelResponse":
        this.response(event);
        break;
      case "ToolCallStarted":
        this.toolStarted(event);
        break;
      case "ToolCallCompleted":
      case "ToolCallFailed":
        this.toolSettled(event);
        break;
      case "ToolApprovalRequested":
        if (!isShownInLane) this.approvalRequested(event);
        break;
      case "ToolApprovalResolved":
        if (!isShownInLane) this.approvalResolved(event);
        break;
      case "ContextCompaction": {
        const chat = this.chat(event);
        const text =
          event.phase === "started"
            ? `compacting the context${event.topic ? ` (topic: ${event.topic})` : ""}…`
            : event.phase === "completed"
              ? `context compacted${typeof event.tokenUsed === "number" ? ` to ${event.tokenUsed} tokens` : ""}`
              : `compaction failed${event.error ? `: ${event.error.message}` : ""}`;
        chat.node.append(
          element(
            "div",
            {
              className: event.phase === "failed" ? "note note-error" : "note",
              "data-testid": "compaction-note",
              "data-phase": event.phase,
            },
            text,
          ),
        );
        break;
      }
      case "ChatCompleted": {
        const chat = this.chat(event);
        if (!chat.hasText && event.result) {
          chat.node.append(
            element("div", { className: "assistant-text", "data-testid": "chat-result" }, event.result),
          );
        }
        const context = typeof event.tokenUsed === "number" ? ` · context ${event.tokenUsed}` : "";
        chat.node.append(
          element(
            "div",
            { className: "usage", "data-testid": "chat-usage" },
            formatUsage(event.usage) + context,
          ),
        );
        break;
      }
      case "ChatFailed": {
        const chat = this.chat(event);
        const text = event.cancelled
          ? "cancelled"
          : `failed: ${event.error ? `${event.error.name}: ${event.error.message}` : "unknown error"}`;
        chat.node.append(element("div", { className: "note note-error", "data-testid": "chat-error" }, text));
        this.closeApprovals(event.chatId, "cancelled");
        break;
      }
      default:
        return;
    }
    this.scroll();
  }

  chat(event) {
    let chat = this.chats.get(event.chatId);
    if (!chat) {
      const node = element("div", {
        className: "chat",
        "data-testid": "chat",
        "data-chat-id": event.chatId,
      });
      chat = { node, user: null, turns: new Map(), hasText: false };
      this.chats.set(event.chatId, chat);
      this.root.append(node);
    }
    return chat;
  }

  turn(event) {
    const chat = this.chat(event);
    const iteration = event.iteration || 1;
    let turn = chat.turns.get(iteration);
    if (!turn) {
      const label = element("div", { className: "turn-label" }, `iteration ${iteration}`);
      const node = element(
        "div",
        { className: "turn", "data-testid": "turn", "data-iteration": iteration },
        label,
      );
      turn = { node, label, segment: null, chat };
      chat.turns.set(iteration, turn);
      chat.node.append(node);
    }
    return turn;
  }

  newSegment(turn, attempt) {
    const node = element("div", {
      className: "segment",
      "data-testid": "segment",
      "data-attempt": attempt,
    });
    turn.node.append(node);
    return { node, attempt, text: null, reasoning: null };
  }

  segment(event) {
    const turn = this.turn(event);
    if (!turn.segment) turn.segment = this.newSegment(turn, 1);
    return turn.segment;
  }

  appendText(segment, which, delta) {
    if (which === "text") {
      if (!segment.text) {
        const node = element("div", { className: "assistant-text", "data-testid": "assistant-text" });
        segment.text = document.createTextNode("");
        node.append(segment.text);
        segment.node.append(node);
      }
      segment.text.appendData(delta);
      const chat = this.findChat(segment);
      if (chat) chat.hasText = true;
    } else {
      if (!segment.reasoning) {
        const body = element("div", { className: "reasoning-text" });
        segment.reasoning = document.createTextNode("");
        body.append(segment.reasoning);
        const details = element(
          "details",
          { className: "reasoning", "data-testid": "reasoning" },
          element("summary", {}, "reasoning"),
          body,
        );
        // Reasoning comes before the answer text of the same segment.
        segment.node.prepend(details);
      }
      segment.reasoning.appendData(delta);
    }
  }

  findChat(segment) {
    const node = segment.node.closest('[data-testid="chat"]');
    return node ? this.chats.get(node.getAttribute("data-chat-id")) : undefined;
  }

  reset(event) {
    const turn = this.turn(event);
    const segment = turn.segment || this.newSegment(turn, event.attempt);
    // The consumer discards everything rendered for a reset segment: the retry's text replaces it, as the history has it.
    segment.node.replaceChildren(
      element(
        "span",
        {
          className: "segment-reset",
          "data-testid": "segment-reset",
          title: event.error ? `${event.error.name}: ${event.error.message}` : "",
        },
        `retried: ${event.reason}`,
      ),
    );
    segment.node.setAttribute("data-reset", "true");
    turn.segment = null;
  }

  response(event) {
    if (event.purpose === "compaction") {
      const chat = this.chat(event);
      chat.node.append(
        element(
          "div",
          { className: "note", "data-testid": "compaction-note" },
          `compaction summary received (${event.usage ? event.usage.completion : "?"} tokens)`,
        ),
      );
      return;
    }
    const turn = this.turn(event);
    const segment = turn.segment;
    // A non-streaming response: nothing was shown yet.
    if ((!segment || !segment.text) && event.content) {
      this.appendText(this.segment(event), "text", event.content);
    }
  }

  /** A call held for approval: shown with Approve / Deny until a decision is seen. */
  approvalRequested(event) {
    if (this.tools.has(toolKey(event))) return;
    this.toolStarted(event);
    const tool = this.tools.get(toolKey(event));
    tool.node.setAttribute("data-status", "awaiting-approval");
    tool.status.textContent = "awaiting approval";
    tool.chatId = event.chatId;
    const request = {
      agent: event.agent,
      session: event.session,
      toolCallId: event.toolCallId,
      arguments: event.arguments,
    };
    const button = (command, label) => {
      const node = element(
        "button",
        { type: "button", className: `approval-${command}`, "data-testid": `${command}-tool` },
        label,
      );
      node.addEventListener("click", () => {
        for (const other of tool.approval.querySelectorAll("button")) other.disabled = true;
        this.decide?.(request, command);
      });
      return node;
    };
    tool.approval = element(
      "div",
      { className: "tool-approval", "data-testid": "tool-approval" },
      // A call held further down the agent tree, decided here (the root) all the same.
      event.heldBy
        ? element(
            "span",
            { className: "approval-holder", "data-testid": "approval-holder" },
            `held by ${event.heldBy.agent} / ${event.heldBy.session}`,
          )
        : null,
      button("approve", "Approve"),
      button("deny", "Deny"),
    );
    tool.node.append(tool.approval);
  }

  approvalResolved(event) {
    const tool = this.tools.get(toolKey(event));
    if (!tool) return;
    tool.approval?.remove();
    tool.approval = null;
    if (event.approved) {
      tool.node.setAttribute("data-status", "approved");
      tool.status.textContent = "approved";
    } else {
      tool.node.setAttribute("data-status", "denied");
      tool.status.textContent = `denied${event.reason ? `: ${event.reason}` : ""}`;
    }
  }

  /** The chat ended: no decision can reach its held calls any more. */
  closeApprovals(chatId, status) {
    for (const tool of this.tools.values()) {
      if (tool.chatId !== chatId || !tool.approval) continue;
      tool.approval.remove();
      tool.approval = null;
      tool.node.setAttribute("data-status", status);
      tool.status.textContent = status;
    }
  }

  toolStarted(event) {
    const existing = this.tools.get(toolKey(event));
    if (existing) {
      // An approved call starts running where its request was shown.
      existing.node.setAttribute("data-status", "running");
      existing.status.textContent = "running…";
      return;
    }
    const turn = this.turn(event);
    const status = element("span", { className: "tool-status", "data-testid": "tool-status" }, "running…");
    const node = element(
      "div",
      {
        className: "tool-call",
        "data-testid": "tool-call",
        "data-tool-call-id": event.toolCallId,
        "data-status": "running",
      },
      element(
        "div",
        { className: "tool-head" },
        element("span", { className: "tool-name" }, event.toolName),
        status,
      ),
      element("pre", { className: "tool-body", "data-testid": "tool-args" }, prettyJson(event.arguments)),
    );
    turn.node.append(node);
    turn.segment = null;
    this.tools.set(toolKey(event), { node, status });
  }

  toolSettled(event) {
    let tool = this.tools.get(toolKey(event));
    if (!tool) {
      this.toolStarted({ ...event, arguments: "" });
      tool = this.tools.get(toolKey(event));
    }
    const isFailed = event.kind === "ToolCallFailed";
    tool.node.setAttribute("data-status", isFailed ? "failed" : "completed");
    tool.status.textContent = `${isFailed ? "failed" : "done"} · ${Math.round(event.durationMs)} ms`;
    tool.status.setAttribute("data-duration-ms", String(event.durationMs));
    if (isFailed && event.error) {
      tool.node.append(
        element(
          "pre",
          { className: "tool-body tool-error", "data-testid": "tool-error" },
          `${event.error.name}: ${event.error.message}`,
        ),
      );
    }
    tool.node.append(
      element("pre", { className: "tool-body", "data-testid": "tool-result" }, prettyJson(event.result)),
    );
  }

  /** A chat another agent asked: who asked it, with a way back to that session. */
  askedBy(parent) {
    const back = element(
      "button",
      { type: "button", className: "lane-open", "data-testid": "open-parent-session" },
      "open session",
    );
    back.addEventListener("click", () => this.openSession?.(parent.agent, parent.session));
    back.hidden = !this.openSession;
    return element(
      "div",
      { className: "note asked-by", "data-testid": "asked-by" },
      `asked by ${parent.agent} / ${parent.session}${parent.toolCallId ? ` (its call ${parent.toolCallId})` : ""} `,
      back,
    );
  }

  // -------------------------------------------------------------------------------------------
  // Sub-agent lanes: under an `ask_agent` call, what the chat it asked does (and the chats that one
  // asked, nested the same way). A lane is open while its chat runs or holds a call for a decision
  // and folds to its one-line head once it ended: the live view follows the work in progress, the
  // answer is the tool's result just below, and a finished tree stays one line per chat until the
  // reader opens it. The reader's own open / close wins from then on.

  renderLane(lane) {
    const nodes = this.laneNodeOf(lane);
    const { details, status, body } = nodes;
    details.setAttribute("data-status", lane.status);
    status.textContent = laneStatusText(lane);
    status.title = lane.error ?? "";
    const isHolding = lane.items.some((item) => item.kind === "tool" && item.approval?.pending);
    if (!nodes.isToggledByReader) details.open = lane.status === "running" || isHolding;
    lane.items.forEach((item, index) => {
      let shown = this.itemNodes.get(item);
      if (!shown) {
        shown = item.kind === "text" ? this.laneTextNode() : this.laneStepNode(item);
        this.itemNodes.set(item, shown);
        // Items are appended, except text that goes before a step known ahead of it.
        const next = lane.items.slice(index + 1).find((later) => this.itemNodes.has(later));
        body.insertBefore(shown.node, next ? this.itemNodes.get(next).node : null);
      }
      // Only what changed is written: a long lane is redrawn at every step of its chat.
      if (item.kind === "text") {
        if (shown.text !== item.text) {
          shown.node.textContent = item.text;
          shown.text = item.text;
        }
      } else {
        const state = `${item.status}|${item.error}|${item.approval?.pending}|${item.approval?.decidable}`;
        if (shown.state !== state) this.updateLaneStep(shown, item, lane);
        shown.state = state;
      }
    });
  }

  laneNodeOf(lane) {
    let nodes = this.laneNodes.get(lane.chatId);
    if (nodes) return nodes;
    const status = element("span", { className: "lane-status", "data-testid": "child-lane-status" });
    const open = element(
      "button",
      {
        type: "button",
        className: "lane-open",
        "data-testid": "open-child-session",
        title: `open ${lane.agent} / ${lane.session} with all its events`,
      },
      "open session",
    );
    open.addEventListener("click", (event) => {
      // Inside the summary: open the session, do not fold the lane.
      event.preventDefault();
      event.stopPropagation();
      this.openSession?.(lane.agent, lane.session);
    });
    open.hidden = !this.openSession;
    const summary = element(
      "summary",
      { className: "lane-head", "data-testid": "child-lane-head" },
      element("span", { className: "lane-arrow" }, "↳"),
      element(
        "span",
        { className: "lane-name", "data-testid": "child-lane-name" },
        `${lane.agent} / ${lane.session}`,
      ),
      status,
      open,
    );
    const body = element("div", { className: "lane-body", "data-testid": "child-lane-body" });
    const details = element(
      "details",
      {
        className: "child-lane",
        "data-testid": "child-lane",
        "data-agent": lane.agent,
        "data-session": lane.session,
        "data-chat-id": lane.chatId,
        "data-depth": lane.depth,
      },
      summary,
      body,
    );
    nodes = { details, status, body, isToggledByReader: false };
    // A click (or Enter / Space) on the head is the reader's: the lane stays as they left it.
    summary.addEventListener("click", () => {
      nodes.isToggledByReader = true;
    });
    this.laneNodes.set(lane.chatId, nodes);
    this.laneContainerOf(lane).append(details);
    return nodes;
  }

  /** Where a lane goes: under the step that asked it, or under this session's own tool call. */
  laneContainerOf(lane) {
    let host;
    if (lane.parent) {
      const asker = this.lanes.get(lane.parent.chatId);
      const step = asker?.steps.get(lane.parent.toolCallId);
      host = step ? this.itemNodes.get(step)?.node : undefined;
    } else {
      let tool = this.tools.get(lane.callKey);
      if (!tool) {
        // Its ToolCallStarted was not seen (a replay that begins mid-call): the call is shown for it.
        const [chatId, toolCallId] = splitCallKey(lane.callKey);
        this.toolStarted({ chatId, toolCallId, toolName: "ask_agent", arguments: "", iteration: 1 });
        tool = this.tools.get(lane.callKey);
      }
      host = tool?.node;
    }
    host ??= this.root;
    let container = host.querySelector(":scope > .child-lanes");
    if (!container) {
      container = element("div", { className: "child-lanes" });
      host.append(container);
    }
    return container;
  }

  laneTextNode() {
    return { node: element("div", { className: "lane-text", "data-testid": "child-text" }) };
  }

  laneStepNode(step) {
    const status = element("span", { className: "tool-status", "data-testid": "child-step-status" });
    const node = element(
      "div",
      {
        className: "lane-step",
        "data-testid": "child-step",
        "data-tool-call-id": step.toolCallId,
        "data-tool-name": step.toolName,
      },
      element(
        "div",
        { className: "tool-head" },
        element("span", { className: "tool-name" }, step.toolName),
        status,
      ),
    );
    return { node, status, approval: null };
  }

  updateLaneStep(shown, step, lane) {
    const { node } = shown;
    node.setAttribute("data-status", step.status);
    shown.status.textContent = stepStatusText(step);
    shown.status.title = step.error ?? "";
    const approval = step.approval;
    if (approval?.pending && approval.decidable && approval.request && this.decide) {
      if (!shown.approval) {
        const request = approval.request;
        const button = (command, label) => {
          const control = element(
            "button",
            { type: "button", className: `approval-${command}`, "data-testid": `${command}-tool` },
            label,
          );
          control.addEventListener("click", () => {
            for (const other of shown.approval.querySelectorAll("button")) other.disabled = true;
            this.decide?.(request, command);
          });
          return control;
        };
        shown.approval = element(
          "div",
          { className: "tool-approval", "data-testid": "tool-approval" },
          element(
            "span",
            { className: "approval-holder", "data-testid": "approval-holder" },
            `${step.toolName} held by ${lane.agent} / ${lane.session}`,
          ),
          button("approve", "Approve"),
          button("deny", "Deny"),
        );
        node.append(
          element(
            "pre",
            { className: "tool-body", "data-testid": "tool-args" },
            prettyJson(approval.arguments),
          ),
        );
        node.append(shown.approval);
      }
    } else if (shown.approval) {
      shown.approval.remove();
      shown.approval = null;
    }
  }

  /** Keeps the newest text in view unless the reader scrolled up; once per frame. */
  scroll() {
    if (!this.stickToBottom || this.scrollScheduled) return;
    this.scrollScheduled = true;
    requestAnimationFrame(() => {
      this.scrollScheduled = false;
      if (!this.stickToBottom) return;
      this.root.scrollTop = this.root.scrollHeight;
      this.lastScrollTop = this.root.scrollTop;
    });
  }
}

function splitCallKey(key) {
  const index = key.indexOf("/");
  return [key.slice(0, index), key.slice(index + 1)];
}

function laneStatusText(lane) {
  if (lane.status === "running") return "running…";
  if (lane.status === "failed") return `failed${lane.error ? `: ${lane.error}` : ""}`;
  return lane.status === "completed" ? "done" : lane.status;
}

function stepStatusText(step) {
  switch (step.status) {
    case "running":
      return "running…";
    case "completed":
      return "done";
    case "failed":
      return `failed${step.error ? `: ${step.error}` : ""}`;
    case "awaiting-approval":
      return "awaiting approval";
    case "denied":
      return `denied${step.approval?.reason ? `: ${step.approval.reason}` : ""}`;
    default:
      return step.status;
  }
}
