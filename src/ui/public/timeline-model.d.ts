// Types of timeline-model.js (plain browser JavaScript, served as it is), for the tests and readers.

import type { ErrorInfo } from "../../events/types.js";
import type { TokenUsage } from "../../llm/types.js";
import type { ChildLane, ChildLanes } from "./child-lanes.js";

export declare const DEFAULT_COMPACT_RATIO: number;

export type ItemStatus = "running" | "completed" | "failed" | "cancelled";

/** One iteration of the loop: from its first to its last event. */
export interface IterationBand {
  iteration: number;
  startMs: number;
  endMs: number;
  /** No end seen yet (the iteration machine has not reached answered / toolsDone / failed). */
  isOpen: boolean;
  /** Its request was the final one (no tools). */
  final: boolean;
}

/** One stream attempt of a request: attempt 1, then one more after each reset. */
export interface RequestAttempt {
  attempt: number;
  startMs: number;
  /** Its first ModelStreamSegmentStart (or delta); null while waiting. */
  firstTokenMs: number | null;
  endMs: number | null;
  reset: { ms: number; reason: string; error: ErrorInfo | null } | null;
}

/** One model request (ModelRequest → its ModelResponse). */
export interface ModelRequestItem {
  /** Position among the chat's requests. */
  index: number;
  iteration: number;
  final: boolean;
  startMs: number;
  firstTokenMs: number | null;
  endMs: number | null;
  status: ItemStatus;
  attempts: RequestAttempt[];
  /** This request's usage (ModelResponse); null until it ends or from hosts that do not publish it. */
  usage: TokenUsage | null;
  toolCalls: number | null;
}

export interface ToolItem {
  toolCallId: string;
  toolName: string;
  iteration: number;
  startMs: number;
  endMs: number | null;
  /** As the host measured it (ToolCallCompleted / ToolCallFailed). */
  durationMs: number | null;
  status: ItemStatus;
  error: ErrorInfo | null;
  /** Parallel calls take the lowest lane free when they start. */
  lane: number;
}

/** Time the chat spent waiting on something other than the model or a tool. */
export interface WaitItem {
  /** `compaction` or `approval` (a tool call held for a person's decision). */
  kind: string;
  startMs: number;
  endMs: number | null;
  status: ItemStatus;
  lane: number;
  /** The summary request's usage (compaction). */
  usage: TokenUsage | null;
  topic?: string | null;
  tokenUsed?: number | null;
  error?: ErrorInfo | null;
  /** Approval waits: the held call. */
  toolName?: string;
  toolCallId?: string;
  /** Approval waits: the decision (null while pending or when the chat ended first). */
  approved?: boolean | null;
  reason?: string | null;
  /** Approval waits of a call held further down the agent tree: the session holding it. */
  heldBy?: { agent: string; session: string } | null;
}

export interface ChatTimeline {
  chatId: string;
  /** The user's message (ChatStarted); null for a manual compaction or a replay that began later. */
  text: string | null;
  startMs: number;
  lastMs: number;
  endMs: number | null;
  status: ItemStatus;
  error: ErrorInfo | null;
  /** The chat's total (ChatCompleted). */
  usage: TokenUsage | null;
  iterations: IterationBand[];
  requests: ModelRequestItem[];
  tools: ToolItem[];
  waits: WaitItem[];
  context: { tokenUsed: number | null; tokenLimit: number | null; compactRatio: number };
  /** The last item of each lane (for allocation); its length is the number of lanes. */
  toolLanes: ToolItem[];
  waitLanes: WaitItem[];
  /** The chats its `ask_agent` calls asked (and those asked in turn), depth first. */
  children: ChildLane[];
}

/** Anything with the event envelope; unknown kinds and fields are ignored. */
export interface TimelineEvent {
  kind: string;
  chatId: string;
  ts: string;
  iteration: number;
  [field: string]: unknown;
}

export declare class TimelineModel {
  readonly chats: Map<string, ChatTimeline>;
  readonly lanes: ChildLanes;
  apply(event: TimelineEvent): ChatTimeline | undefined;
  get(chatId: string): ChatTimeline | undefined;
  latest(): ChatTimeline | undefined;
}

export declare function startWait(
  chat: ChatTimeline,
  kind: string,
  ms: number,
  details?: Partial<WaitItem>,
): WaitItem;
export declare function openWait(chat: ChatTimeline, kind: string): WaitItem | undefined;
