import type { InspectionEvent } from "xstate";
import type { BudgetCheck } from "../../machines/chat.machine.js";
import type { ContextHistory } from "../context/context-history.js";
import type { ChatLineage } from "../contract/chat-lineage.js";
import type { AgentEvent, EventBody } from "../events/types.js";
import type { ChatJournal } from "../journal/chat-journal.js";
import type { SessionJournal } from "../journal/session-journal.js";
import type { LlmClient } from "../llm/llm-client.js";
import type { Message, ReasoningEffort, TokenUsage } from "../llm/types.js";
import type { AgentTracingOptions } from "../telemetry/agent-tracing.js";
import type { SecretRedactor } from "../text/secret-redactor.js";
import type { ToolSet } from "../tools/tool-set.js";
import type { ApprovalOutcome, ToolApprovalDecision } from "./tool-approvals.js";

/** How an agent's chats run; every field is optional and has the default it names. */
export interface AgentOptions {
  /**
   * The system prompt; each ToolSet's static prompt is appended to it when the agent is built.
   * @defaultValue `"You are a helpful assistant."`
   */
  systemPrompt?: string;
  /**
   * Model requests per chat at most; the last one is sent without tools, so the chat ends with an answer.
   * @defaultValue 20
   */
  maxIterations?: number;
  /**
   * The share of `tokenLimit` at which the context is compacted (summarised) before the next request.
   * @defaultValue 0.7
   */
  contextCompactRatio?: number;
  /**
   * The token limit the compaction ratio is measured against (the model's context window).
   * @defaultValue 128_000
   */
  tokenLimit?: number;
  /** Most tokens per model answer. @defaultValue the provider's default */
  maxOutputTokens?: number;
  /** Tool calls of one model turn that run at once. @defaultValue 4 */
  maxConcurrentToolCalls?: number;
  /** The model's thinking budget or effort, where the provider has one. @defaultValue the provider's default */
  reasoningEffort?: ReasoningEffort;
  /** Sampling temperature. @defaultValue the provider's default */
  temperature?: number;
  /** Anthropic: put a prompt-cache breakpoint on the last message of each request. @defaultValue false */
  promptCaching?: boolean;
  /** A model stream silent this long once started fails the chat with a timeout (not retried). @defaultValue 120_000 */
  streamIdleTimeoutMs?: number;
  /**
   * Names of tools whose every call a person must approve first (besides the tools' own
   * `needsApproval`). @defaultValue none
   */
  needsApproval?: readonly string[];
  /** Called with every event of the session; best-effort: its exceptions are swallowed. @defaultValue none */
  onLog?: (event: AgentEvent) => void;
  /** Audit callback for every user / assistant / tool message; exceptions swallowed. @defaultValue none */
  onMessageRecorded?: (message: Message) => void;
}

/** What {@link createAgent} takes: the model client and model, and the session's tools, history and options. */
export interface CreateAgentParams {
  /** Agent name (events carry it). @defaultValue `"agent"` */
  name?: string;
  /** Session id (events carry it). @defaultValue `"default"` */
  session?: string;
  /** The id of the host running the session: every event carries it as `host`. @defaultValue none */
  host?: string;
  /**
   * The model client: a `RetryingLlmClient` in front of a backend (`createBackend`), or the
   * testing kit's `scriptedModel`.
   */
  llm: LlmClient;
  /** The model name sent with each request (e.g. `"claude-sonnet-4-5"`). */
  model: string;
  /** The tools the model may call, grouped in ToolSets; each session gets its own copy. @defaultValue none */
  toolSets?: ToolSet[];
  /** Where the conversation is kept and restored from. @defaultValue in memory, lost with the agent */
  history?: ContextHistory;
  /**
   * Where the session's unfinished work is journaled step by step, so a chat whose host
   * stopped can be resumed ({@link Agent.resumeUnfinishedChat}). Without it nothing is journaled.
   */
  journal?: ChatJournal;
  /** How chats run: prompt, iteration cap, compaction, callbacks. @defaultValue each field's default */
  options?: AgentOptions;
  /**
   * The configured secrets (API keys, NATS credentials), hidden from tool results, events and the
   * errors a chat rejects with. @defaultValue none
   */
  redactor?: SecretRedactor;
  /**
   * Asked as each chat starts: an exceeded budget (a tenant's tokens per period) ends the chat
   * `budget_exceeded` before any model request. @defaultValue no budget
   */
  checkBudget?: () => BudgetCheck;
  /** Posts to the session's mailbox (background tasks); set by the host. */
  post?: (text: string, options?: { type?: string; stackable?: boolean }) => void;
  /**
   * Set by the host: the session's mailbox hands the agent its chats, compactions and resets one
   * at a time, so the agent keeps no queue of its own for them. When false the agent queues them
   * itself, for callers that may call `chat` concurrently. @defaultValue false
   */
  isOrderedByMailbox?: boolean;
  /** OpenTelemetry spans. @defaultValue on when a global tracer provider is registered */
  tracing?: AgentTracingOptions;
  /**
   * An XState inspector on every machine the session runs (chat, iteration, compaction), e.g. the
   * testing kit's state/transition coverage. Its exceptions are not caught.
   */
  inspect?: (inspection: InspectionEvent) => void;
  /** Injected for deterministic tests. */
  now?: () => Date;
  createId?: () => string;
}

/** Per-chat options of {@link Agent.chat}. */
export interface ChatOptions {
  signal?: AbortSignal;
  /** Depth of nested agent-to-agent calls (ask_agent). */
  depth?: number;
  /**
   * This chat's place in an agent tree, when another agent asked it (`ask_agent`): its events carry
   * `parent` and `root`, and the agents it asks in turn inherit the chain (cycles are refused).
   */
  lineage?: ChatLineage;
  /** The W3C `traceparent` of the span that asked: this chat's spans join that trace. */
  traceparent?: string;
  /**
   * When this chat's time runs out (ms since the epoch; its caller cancels it then): the chats it
   * asks get it as their deadline too, so a child never outlives its parent's time.
   */
  deadline?: number;
  /** Sees this chat's events only (e.g. to stream its text to one caller); exceptions swallowed. */
  onEvent?: (event: AgentEvent) => void;
  /**
   * The chat request's client `id`: journaled with the chat, so a chat resumed on
   * another host can store its reply under it for the client's retries.
   */
  requestId?: string;
}

/** How a chat resumed from the journal ended: its result, or why it failed (ChatFailedError…). */
export type ResumedChatOutcome = { ok: true; result: ChatResult } | { ok: false; error: unknown };

/** Options of {@link Agent.resumeUnfinishedChat}. */
export interface ResumeChatOptions {
  signal?: AbortSignal;
  /**
   * Called once when the resumed chat ended, or when the journal shows it had ended before its
   * host stopped (then with its answer from the history, usage 0). Not called when nothing ran.
   */
  onOutcome?: (outcome: ResumedChatOutcome) => void;
}

/** What a successful chat resolves with. */
export interface ChatResult {
  result: string;
  /** Sum over the chat's requests (for billing). */
  usage: TokenUsage;
  /** The id the chat's events carry (so a caller can find the chat in the event log and history). */
  chatId?: string;
}

/** One agent session: runs chats one at a time over its own context (built by `createAgent`). */
export interface Agent {
  readonly name: string;
  readonly session: string;
  /** Runs one chat (the chat machine). Rejects with ChatFailedError / ChatCancelledError. */
  chat(text: string, options?: ChatOptions): Promise<ChatResult>;
  /** Manual compaction (`/compact [topic]`). Resolves false when the summary was empty or failed. */
  compact(topic?: string, options?: { signal?: AbortSignal }): Promise<boolean>;
  /** `/new`: clears context, history and ToolSet state. */
  reset(): Promise<void>;
  /** The last request's prompt + completion tokens. */
  readonly tokenUsed: number;
  readonly contextRatio: number;
  readonly messages: readonly Message[];
  /** Approximately how many bytes the session's messages hold in memory (an estimate kept up to date as they change). */
  readonly memoryBytes?: number;
  /** Publishes a session-level event (chatId "") on this session's stream, e.g. the session machine's StateChanged. */
  report?(body: EventBody): void;
  /**
   * Tells event consumers about a chat the session took but that never ran (dropped from the
   * queue, or stopped while it waited its turn): ChatStarted, then ChatFailed (cancelled, with
   * `reason`), under a fresh chat id.
   */
  reportCancelledChat?(text: string, reason: string): void;
  /** Approves or denies a tool call the running (or parked) chat holds for approval. */
  decideToolCall?(decision: ToolApprovalDecision): Promise<ApprovalOutcome>;
  /**
   * The session further down this chat's agent tree that holds the call `toolCallId` awaiting
   * approval, when this session's running chat is the root that was told of it: a decision sent
   * here is handed on to that session's control subject.
   */
  delegatedApproval?(toolCallId: string): { agent: string; session: string } | undefined;
  /** `stop`: cancels the chat awaiting approval, if any (parked ones included). */
  cancelPendingApproval?(): Promise<void>;
  /**
   * Shutdown: stops a chat awaiting approval, keeping its approval for the next host (and cancels a
   * resumed one still running). Resolves with whether one was parked, once it has let go.
   */
  parkPendingApproval?(): Promise<boolean>;
  /**
   * The agent that asked this session (`ask_agent`) needs approval for these tools: from now on
   * the session's calls to them need approval too (for the life of the session; never fewer).
   */
  inheritApprovals?(toolNames: readonly string[]): void;
  /**
   * The chat its last host left awaiting a tool approval, when its request carried a client id:
   * that id, and how the chat ends once the approval is decided (`outcome`; an UnavailableError
   * if this host stops first, the approval still pending: the next host answers the id).
   * Undefined when there is no such chat. Asked once, when the session opens.
   */
  parkedChat?(): { requestId: string; outcome: Promise<ResumedChatOutcome | undefined> } | undefined;
  /**
   * The client request id of the chat stopped here (shutdown, hand-off) while it awaited a tool
   * approval, its record kept for the session's next host; undefined when there is none.
   */
  readonly parkedRequestId?: string | undefined;
  /** A chat of this session waits for a tool approval (so the session is not idle). */
  readonly hasPendingApproval?: boolean;
  /** The session's journal (its queued chats are journaled by the session's mailbox). */
  readonly journal?: SessionJournal;
  /**
   * Finishes the chat the session's last host left unfinished, if its journal holds one (first in
   * the agent's queue; nobody waits for its answer: it ends in the history and the events).
   * Resolves with whether one ran.
   */
  resumeUnfinishedChat?(options?: ResumeChatOptions): Promise<boolean>;
}
