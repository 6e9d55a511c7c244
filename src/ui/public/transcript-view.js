// The transcript of one session, built event by event (a reset segment's text is discarded: the model is asked again and its retry replaces it).
import { element, formatUsage, prettyJson } from "./dom.js";

/** Tool calls by chat: a provider may reuse a call id in another chat. */
function toolKey(event) {
  return `${event.chatId}/${event.toolCallId}`;
}

export class TranscriptView {
  /**
   * @param {HTMLElement} root
   * @param {{ decide?: (request: object, command: "approve" | "deny") => void }} [options]
   *   `decide` sends the Approve / Deny of a tool call held for approval.
   */
  constructor(root, options = {}) {
    this.root = root;
    this.decide = options.decide;
    this.chats = new Map();
    this.tools = new Map();
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
        this.approvalRequested(event);
        break;
      case "ToolApprovalResolved":
        this.approvalResolved(event);
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
