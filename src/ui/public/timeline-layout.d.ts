// Types of timeline-layout.js (plain browser JavaScript, served as it is), for the tests and readers.

import type { ErrorInfo } from "../../events/types.js";
import type { TokenUsage } from "../../llm/types.js";
import type { LaneStatus, StepStatus } from "./child-lanes.js";
import type { ChatTimeline, ItemStatus, ToolItem, WaitItem } from "./timeline-model.js";

/** A span on the chat's time axis, as fractions 0..1 of the chat's duration. */
export interface Span {
  x0: number;
  x1: number;
}

export interface TimelineLayout {
  chatId: string;
  text: string | null;
  status: ItemStatus;
  error: ErrorInfo | null;
  usage: TokenUsage | null;
  startMs: number;
  endMs: number;
  spanMs: number;
  ticks: Array<{ ms: number; x: number; label: string }>;
  iterations: Array<
    Span & { iteration: number; final: boolean; isOpen: boolean; startMs: number; endMs: number }
  >;
  requests: Array<
    Span & {
      index: number;
      iteration: number;
      final: boolean;
      status: ItemStatus;
      attempts: number;
      usage: TokenUsage | null;
      toolCalls: number | null;
      startMs: number;
      endMs: number;
      durationMs: number;
      /** ModelRequest → the first token of any attempt. */
      ttftMs: number | null;
      /** The last attempt's first token → the request's end. */
      streamMs: number | null;
      /** Per attempt: waiting for the first token, then streaming ("discarded" when it was reset). */
      segments: Array<Span & { kind: "wait" | "stream" | "discarded"; attempt: number }>;
      resets: Array<{ attempt: number; reason: string; error: ErrorInfo | null; ms: number; x: number }>;
    }
  >;
  tools: Array<Span & Omit<ToolItem, "endMs" | "durationMs"> & { endMs: number; durationMs: number }>;
  toolLanes: number;
  waits: Array<Span & Omit<WaitItem, "endMs"> & { endMs: number; durationMs: number }>;
  waitLanes: number;
  /** The chats the `ask_agent` calls asked, depth first: one nested lane each under the tools. */
  children: Array<
    Span & {
      chatId: string;
      agent: string;
      session: string;
      /** 1 under this chat's call, 2 under a step of that lane, … */
      depth: number;
      /** This chat's `ask_agent` call whose progress carried it. */
      toolCallId: string;
      status: LaneStatus;
      error: string | null;
      startMs: number;
      endMs: number;
      durationMs: number;
      steps: Array<
        Span & { toolCallId: string; toolName: string; status: StepStatus; startMs: number; endMs: number }
      >;
    }
  >;
  tokens: Array<{ index: number; iteration: number; final: boolean; usage: TokenUsage }>;
  context: { tokenUsed: number | null; tokenLimit: number | null; ratio: number | null; threshold: number };
}

export declare function layoutTimeline(chat: ChatTimeline, now?: number): TimelineLayout;
export declare function timeTicks(spanMs: number): Array<{ ms: number; x: number; label: string }>;
export declare function formatDuration(ms: number): string;
