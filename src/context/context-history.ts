import type { Message } from "../llm/types.js";
import type { PendingApproval } from "./pending-approval.js";

/**
 * Where a session's conversation is persisted. The system prompt is never stored: it is rebuilt
 * from the agent's options and ToolSets.
 */
export interface ContextHistory {
  /** The stored messages, oldest first. */
  restore(): Promise<Message[]>;
  append(messages: readonly Message[]): Promise<void>;
  /** Replaces everything (after a compaction: one summary message). */
  replace(messages: readonly Message[]): Promise<void>;
  clear(): Promise<void>;
  /**
   * The highest event seq the session may have used (0 when none is stored), so a rebuilt session
   * numbers its events above it. Optional: without it seq starts at 1 each time.
   */
  loadSeq?(): Promise<number>;
  /** Stores an event seq mark; a lower mark than the stored one changes nothing. `clear` keeps it. */
  saveSeq?(seq: number): Promise<void>;
  /** The chat waiting for a tool approval, if any (see {@link PendingApproval}). Optional, like the next two. */
  loadPendingApproval?(): Promise<PendingApproval | undefined>;
  /** Stores (replaces) the session's pending approval. */
  savePendingApproval?(pending: PendingApproval): Promise<void>;
  /** Deletes the pending approval; true when there was one (so only one taker wins). */
  takePendingApproval?(): Promise<boolean>;
}
