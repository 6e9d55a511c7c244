import { z } from "zod";
import type { ErrorInfo as ErrorInfoData } from "../errors/error-info.js";

/**
 * The wire schemas of the agent's lifecycle events, one per kind: the single source of the event
 * types (src/events/types.ts infers them from here) and of the one parser every reader uses
 * ({@link parseEvent}). Events are a public contract (NATS `agentloop.events.<agent>.<session>.<kind>`,
 * the JetStream log, JSONL): fields may be added, never renamed — so each schema lists the fields
 * a reader may rely on and lets others through.
 */

/**
 * An error as it travels in events (src/errors' `ErrorInfo`): `{ code, message, retryable, status?,
 * name? }`. Readers also take an older host's `{ name, message }`, so `code` and `retryable` are
 * optional on the wire.
 */
export const ErrorInfo = z.object({
  code: z.string().optional(),
  message: z.string(),
  retryable: z.boolean().optional(),
  status: z.number().optional(),
  name: z.string().optional(),
  // Typed as what this version emits; the check itself is the lenient one above.
}) as unknown as z.ZodType<ErrorInfoData>;

/** Token counts of one request or chat (`cached` is the part of `prompt` served from a cache). */
export const EventTokenUsage = z.object({
  prompt: z.number(),
  completion: z.number(),
  total: z.number(),
  cached: z.number(),
});

/**
 * A chat of an agent tree (`ask_agent`): its agent, session and chat id, and for a `parent` the
 * tool call that asked.
 */
export const EventChatRef = z.object({
  agent: z.string(),
  session: z.string(),
  chatId: z.string(),
  toolCallId: z.string().optional(),
});

/** Fields every event carries, whatever its kind. */
export const EventBase = z.object({
  agent: z.string(),
  session: z.string(),
  /** The id of the host (process) that ran the session when it emitted this (`serve --host-id`). */
  host: z.string().optional(),
  chatId: z.string(),
  /** Per-session sequence number, strictly increasing. */
  seq: z.number(),
  /** ISO 8601 timestamp. */
  ts: z.string(),
  /** 1-based iteration, 0 for chat-level events. */
  iteration: z.number(),
  /** On every event of a chat another agent asked (`ask_agent`): the asking chat and its tool call. */
  parent: EventChatRef.optional(),
  /** With `parent`: the chat at the top of the tree, the one a person (or a program) asked. */
  root: EventChatRef.optional(),
});

/** The common fields with any non-empty `kind`: what a reader can say of an event of a kind it does not know. */
export const EventEnvelope = EventBase.extend({ kind: z.string().min(1) });

/** Where a `ContextCompaction` event is in the compaction. */
export const CompactionPhase = z.enum(["started", "completed", "failed"]);

/** The kind-specific part of each event, keyed by kind. */
export const EVENT_BODY_SCHEMAS = {
  ChatStarted: z.object({
    kind: z.literal("ChatStarted"),
    text: z.string(),
    /**
     * The chat request's `id` (the one the hosts dedupe retries by), when it had one: ties the
     * chat's events to the request, e.g. an A2A task to its chat on whichever host ran it.
     */
    requestId: z.string().optional(),
    /** The context's size before this chat (tokens). Absent from hosts before these fields. */
    tokenUsed: z.number().optional(),
    /** The token limit the compaction ratio is measured against. */
    tokenLimit: z.number().optional(),
    /** The ratio tokenUsed / tokenLimit at which the context is compacted after a chat. */
    contextCompactRatio: z.number().optional(),
    /**
     * The W3C trace context of the tool call that asked this chat (`ask_agent`, when tracing is on
     * there): this chat's spans belong to that trace, under that call's span.
     */
    traceparent: z.string().optional(),
  }),
  ModelRequest: z.object({ kind: z.literal("ModelRequest"), final: z.boolean(), messageCount: z.number() }),
  ModelStreamSegmentStart: z.object({ kind: z.literal("ModelStreamSegmentStart"), attempt: z.number() }),
  ModelStreamSegmentReset: z.object({
    kind: z.literal("ModelStreamSegmentReset"),
    attempt: z.number(),
    reason: z.string(),
    error: ErrorInfo,
  }),
  ModelTextDelta: z.object({ kind: z.literal("ModelTextDelta"), delta: z.string() }),
  ModelReasoningDelta: z.object({ kind: z.literal("ModelReasoningDelta"), delta: z.string() }),
  /**
   * The end of one model request with that request's usage: every chat request (purpose "chat",
   * after its stream completed) and the compaction summary (purpose "compaction").
   */
  ModelResponse: z.object({
    kind: z.literal("ModelResponse"),
    content: z.string(),
    toolCalls: z.number(),
    usage: EventTokenUsage,
    purpose: z.enum(["chat", "compaction"]).optional(),
  }),
  ToolCallStarted: z.object({
    kind: z.literal("ToolCallStarted"),
    toolName: z.string(),
    toolCallId: z.string(),
    arguments: z.string(),
  }),
  ToolCallCompleted: z.object({
    kind: z.literal("ToolCallCompleted"),
    toolName: z.string(),
    toolCallId: z.string(),
    result: z.string(),
    durationMs: z.number(),
  }),
  ToolCallFailed: z.object({
    kind: z.literal("ToolCallFailed"),
    toolName: z.string(),
    toolCallId: z.string(),
    error: ErrorInfo,
    result: z.string(),
    durationMs: z.number(),
  }),
  /**
   * A step of the chat this tool call asked (`ask_agent`), or of a chat that one asked in turn:
   * `source` names the chat that made it. Text deltas arrive coalesced (`text`, at most one event
   * per source every few hundred ms); the other steps as they happen. `chat_started` names the
   * asked chat as soon as it begins (its `ChatStarted` names this call as its `parent`).
   */
  ToolCallProgress: z.object({
    kind: z.literal("ToolCallProgress"),
    toolName: z.string(),
    toolCallId: z.string(),
    source: EventChatRef,
    step: z.enum([
      "chat_started",
      "text",
      "tool_started",
      "tool_completed",
      "tool_failed",
      "approval_requested",
      "approval_resolved",
      "chat_completed",
      "chat_failed",
    ]),
    /** The text of a `text` step; the error message of a `*_failed` step. */
    text: z.string().optional(),
    /** The tool of a `tool_*` or `approval_requested` step. */
    tool: z.string().optional(),
    /** The tool call of a `tool_*` or `approval_*` step. */
    sourceToolCallId: z.string().optional(),
    /** The arguments an `approval_requested` step is about (JSON text). */
    arguments: z.string().optional(),
    /** The decision of an `approval_resolved` step. */
    approved: z.boolean().optional(),
    /**
     * Set on a step of a chat two or more levels down: the chat and its `ask_agent` call that
     * asked `source` (the child that relayed the step first), so a view nests its lane exactly.
     * Absent on the steps of the chat this call asked itself.
     */
    asker: z
      .object({ agent: z.string(), session: z.string(), chatId: z.string(), toolCallId: z.string() })
      .optional(),
  }),
  /** A call waits for a person: answer `approve` / `deny` with this toolCallId on the control subject. */
  ToolApprovalRequested: z.object({
    kind: z.literal("ToolApprovalRequested"),
    toolName: z.string(),
    toolCallId: z.string(),
    /** The exact arguments the approval is about (JSON text, as the model sent them). */
    arguments: z.string(),
    /**
     * Set on the copy published on the root session's subject for a call of a chat further down the
     * tree: the session that holds the call. Approve it on the root's control subject all the same.
     */
    heldBy: z.object({ agent: z.string(), session: z.string(), chatId: z.string() }).optional(),
  }),
  ToolApprovalResolved: z.object({
    kind: z.literal("ToolApprovalResolved"),
    toolName: z.string(),
    toolCallId: z.string(),
    approved: z.boolean(),
    reason: z.string().optional(),
    /** As on `ToolApprovalRequested`: the session further down the tree that held the call. */
    heldBy: z.object({ agent: z.string(), session: z.string(), chatId: z.string() }).optional(),
  }),
  /**
   * An unfinished chat goes on after its host stopped (a restart, or the session's next owner),
   * under its own chatId, from its last journaled step: `start` (the user message was not yet
   * stored: the chat runs from its text), `model` (the model is asked again), `tools` (the tool
   * calls in flight are settled first).
   */
  ChatResumed: z.object({
    kind: z.literal("ChatResumed"),
    step: z.enum(["start", "model", "tools"]),
    /** The iteration the chat goes on in (1-based; 0 when it starts over). */
    fromIteration: z.number(),
  }),
  /**
   * A tool call that was running when its host stopped, of a tool not declared idempotent: it is
   * not run again; the model gets `{"error":"interrupted",…}` as its result and decides.
   */
  ToolCallInDoubt: z.object({
    kind: z.literal("ToolCallInDoubt"),
    toolName: z.string(),
    toolCallId: z.string(),
    arguments: z.string(),
  }),
  ContextCompaction: z.object({
    kind: z.literal("ContextCompaction"),
    phase: CompactionPhase,
    topic: z.string().optional(),
    error: ErrorInfo.optional(),
    tokenUsed: z.number().optional(),
  }),
  ChatCompleted: z.object({
    kind: z.literal("ChatCompleted"),
    result: z.string(),
    usage: EventTokenUsage,
    tokenUsed: z.number(),
    tokenLimit: z.number().optional(),
  }),
  ChatFailed: z.object({ kind: z.literal("ChatFailed"), error: ErrorInfo, cancelled: z.boolean() }),
  StateChanged: z.object({ kind: z.literal("StateChanged"), machine: z.string(), state: z.unknown() }),
} as const;

/** Every kind this version knows, in the order of the lifecycle. */
export const EVENT_KINDS = Object.keys(EVENT_BODY_SCHEMAS) as ReadonlyArray<keyof typeof EVENT_BODY_SCHEMAS>;
