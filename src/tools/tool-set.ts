import type { Message, ToolCall, ToolDefinition } from "../llm/types.js";

/** What a tool gets besides its arguments. */
export interface ToolContext {
  /** Aborted when the chat is cancelled: pass it into every request the tool makes. */
  signal: AbortSignal;
  /** Adds a message to the conversation after the tool results (e.g. an image the tool fetched). */
  appendMessage(message: Message): void;
  agent: string;
  session: string;
  /** Posts a message to this session's mailbox (background task results). Absent without a host. */
  post?: (text: string, options?: { type?: string; stackable?: boolean }) => void;
  /**
   * Replaces the host's configured secrets in `text`. The runner redacts every result (and
   * everything posted or appended) anyway; a tool that cuts or stores its own output calls this
   * first, or a secret cut in half would no longer be recognized. Absent: nothing to hide.
   */
  redact?: (text: string) => string;
  /** Depth of nested agent-to-agent calls that led to this chat (0 for a user's message). */
  depth?: number;
  /**
   * Names of the tools that need approval in this chat's chain: the agent's own (its list, and
   * tools that may ask), plus those inherited from the agents that asked it (`ask_agent`). An
   * agent asked in turn must ask for approval for them too.
   */
  approvalRequired?: readonly string[];
}

/**
 * A set of tools with optional state. Stateful sets are `copy()`-ed per session; `reset()` clears
 * that state on `/new`. A prompt-only set returns no tools.
 */
export interface ToolSet {
  readonly name: string;
  tools(): ToolDefinition[];
  /** Runs one call; resolves with the result text. Throws for a tool error (the model sees it). */
  invoke(call: ToolCall, context: ToolContext): Promise<string>;
  /** Whether this call must be approved before it runs. Optional: without it no call needs approval. */
  needsApproval?(call: ToolCall): boolean;
  /** Names of the tools of which some call may need approval. Optional: without it, none. */
  approvalTools?(): readonly string[];
  /**
   * Whether running this call twice has the effect of running it once (see `defineTool`'s
   * `idempotent`): it is run again after a host stopped mid-call. Optional: without it, no call is.
   */
  isIdempotent?(call: ToolCall): boolean;
  /** Static text appended to the system prompt once, when the agent is built. */
  prompt(): string;
  /** Dynamic text prepended to each user message (e.g. a live todo-list snapshot). */
  iterationPromptInjection(): string;
  /** A per-session instance. Stateless sets may return themselves. */
  copy(): ToolSet;
  /** Clears session state. */
  reset(): void;
}
