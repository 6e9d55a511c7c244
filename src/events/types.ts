import type { TokenUsage } from "../llm/types.js";

/**
 * The agent's lifecycle events: one discriminated union on `kind`. These are a public contract
 * (they go on NATS as `agentloop.events.<agent>.<session>.<kind>` and into JSONL): fields may be
 * added, never renamed.
 */

export const EVENT_KINDS = [
  "ChatStarted",
  "ModelRequest",
  "ModelStreamSegmentStart",
  "ModelStreamSegmentReset",
  "ModelTextDelta",
  "ModelReasoningDelta",
  "ModelResponse",
  "ToolCallStarted",
  "ToolCallCompleted",
  "ToolCallFailed",
  "ToolApprovalRequested",
  "ToolApprovalResolved",
  "ChatResumed",
  "ToolCallInDoubt",
  "ContextCompaction",
  "ChatCompleted",
  "ChatFailed",
  "StateChanged",
] as const;

/** The `kind` of an event. */
export type EventKind = (typeof EVENT_KINDS)[number];

import type { ErrorInfo } from "../errors/error-info.js";

/** An error as it travels in events: `{ code, message, retryable, status?, name? }` (src/errors). */
export type { ErrorInfo } from "../errors/error-info.js";
export { toErrorInfo } from "../errors/error-info.js";

/** Fields every event carries. */
export interface EventBase {
  agent: string;
  session: string;
  /** The id of the host (process) that ran the session when it emitted this (`serve --host-id`). */
  host?: string;
  chatId: string;
  /** Per-session sequence number, strictly increasing. */
  seq: number;
  /** ISO 8601 timestamp. */
  ts: string;
  /** 1-based iteration, 0 for chat-level events. */
  iteration: number;
}

/** Where a `ContextCompaction` event is in the compaction. */
export type CompactionPhase = "started" | "completed" | "failed";

/** The kind-specific part of each event. */
export type EventBody =
  | {
      kind: "ChatStarted";
      text: string;
      /** The context's size before this chat (tokens). Absent from hosts before these fields. */
      tokenUsed?: number;
      /** The token limit the compaction ratio is measured against. */
      tokenLimit?: number;
      /** The ratio tokenUsed / tokenLimit at which the context is compacted after a chat. */
      contextCompactRatio?: number;
    }
  | { kind: "ModelRequest"; final: boolean; messageCount: number }
  | { kind: "ModelStreamSegmentStart"; attempt: number }
  | { kind: "ModelStreamSegmentReset"; attempt: number; reason: string; error: ErrorInfo }
  | { kind: "ModelTextDelta"; delta: string }
  | { kind: "ModelReasoningDelta"; delta: string }
  | {
      /**
       * The end of one model request with that request's usage: every chat request (purpose
       * "chat", after its stream completed) and the compaction summary (purpose "compaction").
       */
      kind: "ModelResponse";
      content: string;
      toolCalls: number;
      usage: TokenUsage;
      purpose?: "chat" | "compaction";
    }
  | { kind: "ToolCallStarted"; toolName: string; toolCallId: string; arguments: string }
  | { kind: "ToolCallCompleted"; toolName: string; toolCallId: string; result: string; durationMs: number }
  | {
      kind: "ToolCallFailed";
      toolName: string;
      toolCallId: string;
      error: ErrorInfo;
      result: string;
      durationMs: number;
    }
  | {
      /** A call waits for a person: answer `approve` / `deny` with this toolCallId on the control subject. */
      kind: "ToolApprovalRequested";
      toolName: string;
      toolCallId: string;
      /** The exact arguments the approval is about (JSON text, as the model sent them). */
      arguments: string;
    }
  | {
      kind: "ToolApprovalResolved";
      toolName: string;
      toolCallId: string;
      approved: boolean;
      reason?: string;
    }
  | {
      /**
       * An unfinished chat goes on after its host stopped (a restart, or the session's next owner),
       * under its own chatId, from its last journaled step: `start` (the user message was not yet
       * stored: the chat runs from its text), `model` (the model is asked again), `tools` (the tool
       * calls in flight are settled first).
       */
      kind: "ChatResumed";
      step: "start" | "model" | "tools";
      /** The iteration the chat goes on in (1-based; 0 when it starts over). */
      fromIteration: number;
    }
  | {
      /**
       * A tool call that was running when its host stopped, of a tool not declared idempotent: it is
       * not run again; the model gets `{"error":"interrupted",…}` as its result and decides.
       */
      kind: "ToolCallInDoubt";
      toolName: string;
      toolCallId: string;
      arguments: string;
    }
  | {
      kind: "ContextCompaction";
      phase: CompactionPhase;
      topic?: string;
      error?: ErrorInfo;
      tokenUsed?: number;
    }
  | { kind: "ChatCompleted"; result: string; usage: TokenUsage; tokenUsed: number; tokenLimit?: number }
  | { kind: "ChatFailed"; error: ErrorInfo; cancelled: boolean }
  | { kind: "StateChanged"; machine: string; state: unknown };

/** One event: the common fields plus the kind's own. */
export type AgentEvent = EventBase & EventBody;

/** The event of one kind, e.g. `EventOf<"ToolCallCompleted">`. */
export type EventOf<K extends EventKind> = Extract<AgentEvent, { kind: K }>;

/** Receives events. Best-effort: implementations must not throw into the loop. */
export type EventListener = (event: AgentEvent) => void;
