import type { Bus, Subscription } from "../bus/bus.js";
import { sessionEventsPattern } from "../bus/subjects.js";
import { parseEventJson } from "../events/parse-event.js";
import type { AgentEvent } from "../events/types.js";
import type { HeldApproval, ToolProgress } from "./tool-set.js";

/** How often coalesced text of one asked chat is reported at most, by default. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 250;

export interface ChildProgressOptions {
  bus: Bus;
  prefix: string;
  /** The asked agent and the session the question goes to. */
  agent: string;
  session: string;
  /** The asking chat and tool call: only chats whose `parent` they are count. */
  parentChatId: string;
  parentToolCallId: string;
  report: (step: ToolProgress) => void;
  /** A call of the asked chat, or of one it asked in turn, waits for approval (or no longer does). */
  onApproval?: (held: HeldApproval, pending: boolean) => void;
  intervalMs?: number;
}

/**
 * Relays what an asked chat does to the asking tool call, as `ToolCallProgress` steps: it listens
 * on the asked session's event subjects for the chat whose `parent` is the asking call, and turns
 * its events into steps — text deltas coalesced (one step per `intervalMs` at most, so a fast
 * model does not flood the asker's subject), tool steps, approvals and the end as they come. A
 * chat the asked one asks in turn reports to it the same way, and its `ToolCallProgress` is
 * passed up unchanged (its `source` names the chat that made the step), so the root sees the
 * whole tree move. Best-effort: a malformed event is skipped.
 */
export function relayChildProgress(options: ChildProgressOptions): { ready: Promise<void>; close(): void } {
  const { report, onApproval } = options;
  const intervalMs = options.intervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS;
  let pendingText = "";
  let pendingSource: ToolProgress["source"] | undefined;
  let timer: NodeJS.Timeout | undefined;
  const flush = (): void => {
    clearTimeout(timer);
    timer = undefined;
    if (pendingText === "" || pendingSource === undefined) return;
    report({ source: pendingSource, step: "text", text: pendingText });
    pendingText = "";
  };
  const step = (progress: ToolProgress): void => {
    flush();
    report(progress);
  };
  const isOurs = (event: AgentEvent): boolean =>
    event.parent?.chatId === options.parentChatId && event.parent.toolCallId === options.parentToolCallId;
  /** The step an event of an asked chat makes; undefined for a delta (coalesced) and what is not a step. */
  const stepOf = (event: AgentEvent): ToolProgress | undefined => {
    if (!isOurs(event)) return undefined;
    const source = { agent: event.agent, session: event.session, chatId: event.chatId };
    switch (event.kind) {
      case "ChatStarted":
        return { source, step: "chat_started" };
      case "ModelTextDelta":
        if (pendingSource !== undefined && pendingSource.chatId !== source.chatId) flush();
        pendingSource = source;
        pendingText += event.delta;
        timer ??= setTimeout(flush, intervalMs);
        return undefined;
      case "ToolCallStarted":
        return {
          source,
          step: "tool_started",
          tool: event.toolName,
          sourceToolCallId: event.toolCallId,
        };
      case "ToolCallCompleted":
        return {
          source,
          step: "tool_completed",
          tool: event.toolName,
          sourceToolCallId: event.toolCallId,
        };
      case "ToolCallFailed":
        return {
          source,
          step: "tool_failed",
          tool: event.toolName,
          sourceToolCallId: event.toolCallId,
          text: event.error.message,
        };
      case "ToolApprovalRequested": {
        const held = {
          holder: source,
          toolCallId: event.toolCallId,
          toolName: event.toolName,
          arguments: event.arguments,
        };
        onApproval?.(held, true);
        return {
          source,
          step: "approval_requested",
          tool: event.toolName,
          sourceToolCallId: event.toolCallId,
          arguments: event.arguments,
        };
      }
      case "ToolApprovalResolved":
        onApproval?.(
          {
            holder: source,
            toolCallId: event.toolCallId,
            toolName: event.toolName,
            arguments: "",
            approved: event.approved,
          },
          false,
        );
        return {
          source,
          step: "approval_resolved",
          tool: event.toolName,
          sourceToolCallId: event.toolCallId,
          approved: event.approved,
        };
      case "ToolCallProgress": {
        // A step from further down: passed up as it is, its approvals seen here too. The first
        // relay names who asked its source: the asked chat's call that relayed it to us.
        const { kind: _kind, toolName: _name, toolCallId: _id, ...nested } = event;
        const {
          agent: _a,
          session: _s,
          chatId: _c,
          seq: _seq,
          ts: _ts,
          iteration: _i,
          host: _h,
          parent: _p,
          root: _r,
          ...relayed
        } = nested;
        const body: ToolProgress =
          relayed.asker === undefined
            ? {
                ...relayed,
                asker: {
                  agent: event.agent,
                  session: event.session,
                  chatId: event.chatId,
                  toolCallId: event.toolCallId,
                },
              }
            : relayed;
        if (body.sourceToolCallId !== undefined && body.tool !== undefined) {
          const held = {
            holder: { agent: body.source.agent, session: body.source.session, chatId: body.source.chatId },
            toolCallId: body.sourceToolCallId,
            toolName: body.tool,
            arguments: body.arguments ?? "",
            ...(body.approved === undefined ? {} : { approved: body.approved }),
          };
          if (body.step === "approval_requested") onApproval?.(held, true);
          else if (body.step === "approval_resolved") onApproval?.(held, false);
        }
        return body;
      }
      case "ChatCompleted":
        return { source, step: "chat_completed" };
      case "ChatFailed":
        return { source, step: "chat_failed", text: event.error.message };
      default:
        return undefined;
    }
  };
  const subscription: Subscription = options.bus.subscribe(
    sessionEventsPattern(options.prefix, options.agent, options.session),
    (message) => {
      const parsed = parseEventJson(message.data);
      if (parsed.status !== "known") return;
      try {
        const progress = stepOf(parsed.event);
        if (progress !== undefined) step(progress);
      } catch {
        // Best-effort: the answer matters, the progress is a view of it.
      }
    },
  );
  return {
    // The subscription must be at the server before the question is sent, or the first steps are lost.
    ready: options.bus.flush().catch(() => {}),
    close() {
      flush();
      subscription.unsubscribe();
    },
  };
}
