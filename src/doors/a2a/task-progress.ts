import { z } from "zod";
import type { AgentEvent } from "../../events/types.js";

/**
 * What the door stores per A2A task (in the KV bucket of tasks): enough to find the chat's events
 * in the JetStream event log. The task's state is never stored; it is read from the events, so
 * any door of the system, on any host, answers for any task.
 */
export const TaskRecord = z.object({
  /** The task id, also the chat request's `id` (the hosts dedupe retries by it). */
  id: z.string().min(1),
  agent: z.string().min(1),
  /** The session. */
  contextId: z.string().min(1),
  /** The user message as sent, and its A2A message id. */
  text: z.string(),
  messageId: z.string(),
  createdAt: z.string(),
  /** The event log's sequence from which this chat's events can be: its last sequence + 1 when the task was made. */
  fromSeq: z.number().int().positive(),
  /** Set when the chat request was refused before the chat started (no events will come). */
  failure: z.object({ code: z.string(), message: z.string() }).optional(),
});
export type TaskRecord = z.infer<typeof TaskRecord>;

/** The lifecycle of a task as agentloop sees it; mapped to A2A's `TaskState` at the edge. */
export type TaskPhase = "submitted" | "working" | "input-required" | "completed" | "failed" | "canceled";

/** A tool call held for a person's approval: what the client must answer. */
export interface PendingApproval {
  toolCallId: string;
  toolName: string;
  /** The exact arguments the approval is about (JSON text). */
  arguments: string;
}

/** A task's state folded from its chat's events. */
export interface TaskProgress {
  phase: TaskPhase;
  /** The chat's id, once its `ChatStarted` (with this task's request id) was seen. */
  chatId?: string;
  /** When the phase last changed (ISO 8601). */
  timestamp: string;
  result?: string;
  error?: string;
  approval?: PendingApproval;
}

/** True for the phases a task never leaves. */
export function isFinalPhase(phase: TaskPhase): boolean {
  return phase === "completed" || phase === "failed" || phase === "canceled";
}

/** A new task's progress: submitted, or failed when its request was refused. */
export function initialProgress(record: TaskRecord): TaskProgress {
  if (record.failure === undefined) return { phase: "submitted", timestamp: record.createdAt };
  return {
    phase: record.failure.code === "cancelled" ? "canceled" : "failed",
    timestamp: record.createdAt,
    error: record.failure.message,
  };
}

/**
 * The progress after one event of the task's session. Pure: events of other chats of the session
 * leave it as it is; the chat is recognised by the `requestId` of its `ChatStarted`.
 */
export function advanceProgress(progress: TaskProgress, taskId: string, event: AgentEvent): TaskProgress {
  if (progress.chatId === undefined) {
    if (event.kind !== "ChatStarted" || event.requestId !== taskId || isFinalPhase(progress.phase)) {
      return progress;
    }
    return { phase: "working", chatId: event.chatId, timestamp: event.ts };
  }
  if (event.chatId !== progress.chatId) return progress;
  const { chatId } = progress;
  switch (event.kind) {
    case "ChatResumed":
      return { phase: "working", chatId, timestamp: event.ts };
    case "ToolApprovalRequested":
      return {
        phase: "input-required",
        chatId,
        timestamp: event.ts,
        approval: { toolCallId: event.toolCallId, toolName: event.toolName, arguments: event.arguments },
      };
    case "ToolApprovalResolved":
      return progress.approval?.toolCallId === event.toolCallId
        ? { phase: "working", chatId, timestamp: event.ts }
        : progress;
    case "ChatCompleted":
      return { phase: "completed", chatId, timestamp: event.ts, result: event.result };
    case "ChatFailed":
      return {
        phase: event.cancelled ? "canceled" : "failed",
        chatId,
        timestamp: event.ts,
        error: event.error.message,
      };
    default:
      return progress;
  }
}
