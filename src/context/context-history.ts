import type { Message } from "../llm/types.js";

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
}
