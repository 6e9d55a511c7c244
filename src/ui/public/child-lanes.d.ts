// Types of child-lanes.js (plain browser JavaScript, served as it is), for the tests and readers.

export declare const ASK_AGENT_TOOL: string;

/** Whether `session` is the session `ask_agent` of `agent`/`askerSession` asks. */
export declare function isAskedSessionOf(agent: string, askerSession: string, session: string): boolean;

export declare function callKeyOf(chatId: string, toolCallId: string): string;

export type LaneStatus = "running" | "completed" | "failed" | "cancelled";

export type StepStatus =
  | "running"
  | "completed"
  | "failed"
  | "awaiting-approval"
  | "approved"
  | "denied"
  | "cancelled";

/** A held call of an asked chat. */
export interface StepApproval {
  /** The arguments the decision binds to (JSON text). */
  arguments: string;
  pending: boolean;
  approved: boolean | null;
  reason: string | null;
  /** Its copy reached the viewed session (the root of the tree): it may be decided from here. */
  decidable: boolean;
  /** What the root's control route takes to decide it (with `decidable`). */
  request?: { agent: string; session: string; toolCallId: string; arguments: string };
}

export interface LaneText {
  kind: "text";
  text: string;
}

export interface LaneStep {
  kind: "tool";
  /** The asked chat's own tool call id. */
  toolCallId: string;
  toolName: string;
  status: StepStatus;
  /** A failed step's error message. */
  error: string | null;
  startMs: number | null;
  endMs: number | null;
  approval: StepApproval | null;
  /** The chats this step asked (an `ask_agent` step), by chatId. */
  lanes: string[];
  /** Known only from the root's copy of its approval so far: text relayed next goes before it. */
  isAheadOfItsStep: boolean;
}

export type LaneItem = LaneText | LaneStep;

/** One asked chat, as the viewed session saw it. */
export interface ChildLane {
  chatId: string;
  agent: string;
  session: string;
  /** The viewed session's `ask_agent` call whose progress carried it (`<chatId>/<toolCallId>`). */
  callKey: string;
  /** The lane and step that asked it; null for a chat the viewed session's call asked itself. */
  parent: { chatId: string; toolCallId: string } | null;
  /** 1 under the viewed session's call, 2 under a step of that lane, … */
  depth: number;
  status: LaneStatus;
  /** A failed chat's error message. */
  error: string | null;
  startMs: number | null;
  endMs: number | null;
  lastMs: number | null;
  /** Its text and tool steps, in order. */
  items: LaneItem[];
  steps: Map<string, LaneStep>;
}

export interface LaneEvent {
  kind: string;
  chatId: string;
  ts: string;
  [field: string]: unknown;
}

export declare class ChildLanes {
  readonly lanes: Map<string, ChildLane>;
  readonly byCall: Map<string, string[]>;
  /** Folds one event of the viewed session in; returns the lanes it changed. */
  apply(event: LaneEvent): ChildLane[];
  get(chatId: string): ChildLane | undefined;
  /** The lanes the viewed session's tool call asked itself. */
  lanesOf(chatId: string, toolCallId: string): ChildLane[];
  /** Every lane under the viewed chat's tool calls, depth first. */
  treeOf(chatId: string): ChildLane[];
}
