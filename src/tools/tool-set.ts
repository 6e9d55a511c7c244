import type { ChatLineage } from "../contract/chat-lineage.js";
import type { EventBase, EventOf } from "../events/types.js";
import type { Message, ToolCall, ToolDefinition } from "../llm/types.js";

/** A call held for approval further down an agent tree, as the asking call learns of it. */
export interface HeldApproval {
  /** The chat that holds the call. */
  holder: { agent: string; session: string; chatId: string };
  toolCallId: string;
  toolName: string;
  /** The arguments the approval is about (JSON text; empty for a decision). */
  arguments: string;
  /** The decision, once there is one. */
  approved?: boolean;
}

/** A chat of another agent that a tool call asked (`ask_agent`): its agent and session. */
export interface AskedChatRef {
  agent: string;
  session: string;
}

/** A step of an asked chat, reported as the calling tool call's `ToolCallProgress` (see {@link ToolContext.progress}). */
export type ToolProgress = Omit<
  EventOf<"ToolCallProgress">,
  keyof EventBase | "kind" | "toolName" | "toolCallId"
>;

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
  /** The id of this tool call (as the model gave it). */
  toolCallId?: string;
  /** The id of the chat running this call. */
  chatId?: string;
  /** The running chat's place in an agent tree, when another agent asked it (see `ChatOptions.lineage`). */
  lineage?: ChatLineage;
  /** When the running chat's time runs out (ms since the epoch): a chat it asks must end by then. */
  deadline?: number;
  /** The W3C `traceparent` of this call's span, when tracing is on: a chat it asks joins the trace. */
  traceparent?: string;
  /**
   * Set in a chat at the top of its tree: a call of a chat this call asked (or one further down)
   * waits for approval (`pending`), or was decided. The session then takes the decision on its own
   * control subject and hands it to the session holding the call.
   */
  delegateApproval?: (held: HeldApproval, pending: boolean) => void;
  /** Reports a step of work this call started elsewhere (an asked agent's) as a `ToolCallProgress` event. */
  progress?: (step: ToolProgress) => void;
  /**
   * Names of the tools that need approval in this chat's chain: the agent's own (its list, and
   * tools that may ask), plus those inherited from the agents that asked it (`ask_agent`). An
   * agent asked in turn must ask for approval for them too.
   */
  approvalRequired?: readonly string[];
  /**
   * Records that this call is about to ask another agent's chat, before the question is sent:
   * should this host die while the call waits, the chat resumed from the journal stops that chat
   * (see {@link ToolSet.stopAskedChat}). Resolves once stored; never rejects. Absent: no journal.
   */
  noteAskedChat?: (toolCallId: string, chat: AskedChatRef) => Promise<void>;
}

/**
 * A set of tools with optional state. Stateful sets are `copy()`-ed per session; `reset()` clears
 * that state on `/new`. A prompt-only set returns no tools.
 */
export interface ToolSet {
  readonly name: string;
  tools(): readonly ToolDefinition[];
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
  /**
   * Stops a chat a call of this set asked (see {@link ToolContext.noteAskedChat}) that nobody waits
   * for any more: the asking host died and the call was resumed in doubt. Best effort, never
   * throws. Optional: without it, nothing is stopped.
   */
  stopAskedChat?(chat: AskedChatRef): void;
  /** Static text appended to the system prompt once, when the agent is built. */
  prompt(): string;
  /** Dynamic text prepended to each user message (e.g. a live todo-list snapshot). */
  iterationPromptInjection(): string;
  /** A per-session instance. Stateless sets may return themselves. */
  copy(): ToolSet;
  /** Clears session state. */
  reset(): void;
}
