import {
  type Actor,
  type ActorOptions,
  type AnyStateMachine,
  createActor,
  type InputFrom,
  type InspectionEvent,
  toPromise,
} from "xstate";
import { toolCallActor } from "../../actors/tool-call.js";
import type { BudgetCheck } from "../../machines/chat.machine.js";
import { type ChatOutput, upgradeChatSnapshot } from "../../machines/chat.machine.js";
import type { ContextHistory } from "../context/context-history.js";
import { type Compactor, ContextManager } from "../context/context-manager.js";
import { HistoryError } from "../context/history-errors.js";
import { estimateMessageBytes, estimateMessagesBytes } from "../context/message-bytes.js";
import type { PendingApproval } from "../context/pending-approval.js";
import type { ChatLineage } from "../contract/chat-lineage.js";
import { describeError } from "../errors/describe-error.js";
import { errorInfo, toErrorInfo } from "../errors/error-info.js";
import { UnavailableError } from "../errors/unavailable-error.js";
import type { EventEmitter } from "../events/event-emitter.js";
import type { AgentEvent, EventBody } from "../events/types.js";
import { type ResumedChat, settleUnfinishedChat } from "../journal/resume-chat.js";
import type { SessionJournal } from "../journal/session-journal.js";
import type { LlmClient } from "../llm/llm-client.js";
import { emptyUsage, type LlmOptions, type Message, type ToolCall } from "../llm/types.js";
import { toWellFormed } from "../llm/well-formed-message.js";
import type { SecretRedactor } from "../text/secret-redactor.js";
import type { AskedChatRef, HeldApproval, ToolContext, ToolSet } from "../tools/tool-set.js";
import type { Agent, ChatOptions, ChatResult, ResumeChatOptions, ResumedChatOutcome } from "./agent-types.js";
import { boundMachines } from "./bound-machines.js";
import { chatCancelEvent, isPassedOn } from "./chat-cancel.js";
import { ChatCancelledError, ChatFailedError } from "./chat-errors.js";
import { type ApprovalRequest, type SessionDeps, SessionDepsBase, withSessionDeps } from "./session-deps.js";
import { createStateReporter } from "./state-reporter.js";
import {
  type ApprovalOutcome,
  type ToolApprovalDecision,
  ToolApprovals,
  type ToolApprovalsParams,
} from "./tool-approvals.js";
import { ToolCallLimit } from "./tool-call-limit.js";

/** What one chat is built from, resolved once from the agent's options (see createAgent). */
export interface ChatSettings {
  systemPrompt: string;
  /** Model, maxTokens, reasoningEffort … (tools are added per request). */
  baseOptions: LlmOptions;
  maxIterations: number;
  contextCompactRatio: number;
  tokenLimit: number;
  maxConcurrentToolCalls: number;
  /** Tool names whose every call needs approval (besides the ToolSets' own `needsApproval`). */
  approvalList: ReadonlySet<string>;
}

/** What {@link AgentSession.create} takes: the parts createAgent resolved. */
export interface AgentSessionParams {
  name: string;
  session: string;
  settings: ChatSettings;
  llm: LlmClient;
  events: EventEmitter;
  /** The listeners `events` calls; a chat's own listener is added while it runs. */
  listeners: Array<(event: AgentEvent) => void>;
  history: ContextHistory | undefined;
  /** The session's own copies of the ToolSets. */
  toolSets: readonly ToolSet[];
  redactor: SecretRedactor;
  recordMessage(message: Message): void;
  post: ((text: string, options?: { type?: string; stackable?: boolean }) => void) | undefined;
  /** The `traceparent` of a running tool call's span, when the session is traced. */
  traceparentOf?: (toolCallId: string) => string | undefined;
  /** Asked as each chat starts (a tenant's token budget); undefined: no budget. */
  checkBudget: (() => BudgetCheck) | undefined;
  /** Publish StateChanged for every machine (only when someone reads the events). */
  isReportingStates: boolean;
  inspect: ((inspection: InspectionEvent) => void) | undefined;
  /** A chat the history holds awaiting a tool approval (stopped by the previous host). */
  parked: PendingApproval | undefined;
  /** Where the session's unfinished work is journaled, if anywhere. */
  journal: SessionJournal | undefined;
  /**
   * A host's session mailbox hands this session its chats, compactions and resets one at a time
   * (and waits for a stopped one to settle): the session keeps no queue of its own for them.
   */
  isOrderedByMailbox?: boolean;
  createId(): string;
}

/**
 * One agent session: owns its context and runs one operation on it at a time. Used directly
 * (`createAgent()`, `agentloop chat --local`), chats, compactions, resets and a resumed parked chat
 * take their turn in one queue ({@link AgentSession.#serialise}), because library callers may call
 * `chat` concurrently and a cancelled chat still writes its back-filled messages after it was told
 * to stop. Behind a host's session mailbox (`isOrderedByMailbox`), the mailbox is that one queue:
 * the session only makes its operations wait for a parked chat resumed out of band.
 *
 * Each operation starts a root actor of a bound machine ({@link boundMachines}) with this session's
 * {@link SessionDeps} as `input.deps`.
 */
export class AgentSession implements Agent {
  /**
   * The session's {@link SessionDeps}: one small object per session pointing back at it, whose
   * fields and functions live on this class's prototype. Closures for each of them would cost
   * every idle session a dozen functions and their contexts.
   */
  static readonly #Deps = class SessionDepsOf
    extends SessionDepsBase
    implements SessionDeps, ToolApprovalsParams
  {
    readonly #agent: AgentSession;

    constructor(agent: AgentSession) {
      super();
      this.#agent = agent;
    }

    get llm(): LlmClient {
      return this.#agent.#llm;
    }

    get events(): EventEmitter {
      return this.#agent.#events;
    }

    get history(): ContextHistory | undefined {
      return this.#agent.#history;
    }

    get toolSets(): readonly ToolSet[] {
      return this.#agent.#toolSets;
    }

    get redactor(): SecretRedactor {
      return this.#agent.#redactor;
    }

    limitToolCall<T>(task: () => Promise<T>): Promise<T> {
      const agent = this.#agent;
      agent.#toolCallLimit ??= new ToolCallLimit(agent.#settings.maxConcurrentToolCalls);
      return agent.#toolCallLimit.run(task);
    }

    toolContext(): Omit<ToolContext, "signal" | "appendMessage"> {
      return this.#agent.#toolContext();
    }

    recordMessage(message: Message): void {
      const agent = this.#agent;
      agent.#journal?.record(message);
      agent.#recordMessage(message);
    }

    needsApproval(call: ToolCall): boolean {
      const agent = this.#agent;
      return (
        agent.#settings.approvalList.has(call.name) ||
        agent.#inherited?.has(call.name) === true ||
        agent.#toolSets.some((set) => set.needsApproval?.(call) === true)
      );
    }

    announceApprovals(iteration: number, requests: readonly ApprovalRequest[]): void {
      this.#agent.#toolApprovals().announce(iteration, requests);
    }

    now(): number {
      return Date.now();
    }

    get traceparentOf(): ((toolCallId: string) => string | undefined) | undefined {
      return this.#agent.#traceparentOf;
    }

    /** Only a journaled session notes its calls' starts (the tool-call actor skips the step otherwise). */
    get noteToolStart(): ((call: ToolCall) => Promise<void>) | undefined {
      return this.#agent.#journal === undefined ? undefined : this.#noteToolStart;
    }

    #noteToolStart(call: ToolCall): Promise<void> {
      const agent = this.#agent;
      return (agent.#journal as SessionJournal).toolStarting(call.id, agent.#isIdempotent(call));
    }

    // What the session's ToolApprovals ask of it (see ToolApprovalsParams).

    get parked(): PendingApproval | undefined {
      return this.#agent.#parked;
    }

    resume(pending: PendingApproval): Promise<void> {
      return this.#agent.#resumeChat(pending);
    }

    redact(text: string): string {
      return this.#agent.#redactor.redact(text);
    }

    inheritedApprovals(): readonly string[] {
      return [...(this.#agent.#inherited ?? [])].sort();
    }
  };

  readonly name: string;
  readonly session: string;
  readonly #settings: ChatSettings;
  readonly #llm: LlmClient;
  readonly #events: EventEmitter;
  /** The listeners `#events` calls; a chat's own listener is added while it runs. */
  readonly #listeners: Array<(event: AgentEvent) => void>;
  readonly #history: ContextHistory | undefined;
  readonly #toolSets: readonly ToolSet[];
  readonly #redactor: SecretRedactor;
  readonly #recordMessage: (message: Message) => void;
  readonly #post: AgentSessionParams["post"];
  readonly #traceparentOf: AgentSessionParams["traceparentOf"];
  readonly #checkBudget: AgentSessionParams["checkBudget"];
  readonly #isReportingStates: boolean;
  readonly #inspect: AgentSessionParams["inspect"];
  readonly #parked: PendingApproval | undefined;
  readonly #journal: SessionJournal | undefined;
  readonly #isOrderedByMailbox: boolean;
  readonly #createId: () => string;
  readonly #deps: SessionDeps & ToolApprovalsParams;
  #manager!: ContextManager;
  /** Depth of the running chat's agent-to-agent nesting (its tools see it). */
  #depth = 0;
  /** The running chat's place in an agent tree and the trace it joins (its tools see them). */
  #lineage: ChatLineage | undefined;
  /** When the running chat's time runs out (its tools hand it down). */
  #deadline: number | undefined;
  /**
   * Calls held for approval further down this root chat's tree, by tool call id: who holds each.
   * Made at the first such call, dropped once empty (most sessions never have one).
   */
  #delegated: Map<string, { agent: string; session: string }> | undefined;
  #queue: Promise<unknown> | undefined;
  /** Where the parked chat's end goes, once asked for (see {@link parkedChat}); settled once. */
  #parkedAnswer:
    | {
        requestId: string;
        outcome: Promise<ResumedChatOutcome | undefined>;
        settle(outcome: ResumedChatOutcome | undefined): void;
      }
    | undefined;
  /** Built at the session's first tool call (an idle session pays nothing for it). */
  #toolCallLimit: ToolCallLimit | undefined;
  /** The running chat's {@link #approvalChain}, listed at its first tool call (not at every call). */
  #chatApprovalChain: readonly string[] | undefined;
  /** Made at the session's first tool call at the root of a tree (see {@link #delegateApproval}). */
  #delegateApprovalFn: ToolContext["delegateApproval"];
  /** Built at the session's first chat or decision (at once when a parked approval waits). */
  #approvals: ToolApprovals | undefined;
  /**
   * Tools the agents that asked this session need approval for (see {@link inheritApprovals}); made
   * at the first one.
   */
  #inherited: Set<string> | undefined;
  /** The context's messages as last measured for {@link memoryBytes}, their count and estimate. */
  #measured: readonly Message[] = [];
  #measuredLength = 0;
  #memoryBytes = 0;

  /** Keeps what it uses of `params`, not the object itself (most of it would be held twice). */
  private constructor(params: AgentSessionParams) {
    this.name = params.name;
    this.session = params.session;
    this.#settings = params.settings;
    this.#llm = params.llm;
    this.#events = params.events;
    this.#listeners = params.listeners;
    this.#history = params.history;
    this.#toolSets = params.toolSets;
    this.#redactor = params.redactor;
    this.#recordMessage = params.recordMessage;
    this.#post = params.post;
    this.#traceparentOf = params.traceparentOf;
    this.#checkBudget = params.checkBudget;
    this.#isReportingStates = params.isReportingStates;
    this.#inspect = params.inspect;
    this.#parked = params.parked;
    this.#journal = params.journal;
    this.#isOrderedByMailbox = params.isOrderedByMailbox === true;
    this.#createId = params.createId;
    this.#deps = new AgentSession.#Deps(this);
  }

  /**
   * The parts of a tool call's ToolContext that come from the session (see SessionDeps.toolContext):
   * a new object at each call.
   */
  #toolContext(): Omit<ToolContext, "signal" | "appendMessage"> {
    // Filled in field by field: spreads of conditional parts would build a temporary for each.
    const context: Omit<ToolContext, "signal" | "appendMessage"> = {
      agent: this.name,
      session: this.session,
      depth: this.#depth,
      chatId: this.#events.chatId,
    };
    if (this.#deadline !== undefined) context.deadline = this.#deadline;
    // Only the root of a tree takes its approvals: the chats in between pass them up.
    if (this.#lineage === undefined) context.delegateApproval = this.#delegateApproval();
    else context.lineage = this.#lineage;
    context.approvalRequired = this.#chatApprovalChain ??= this.#approvalChain();
    if (this.#post) context.post = this.#post;
    const journal = this.#journal;
    if (journal) {
      context.noteAskedChat = (callId: string, chat: AskedChatRef) => journal.chatAsked(callId, chat);
    }
    return context;
  }

  /** Notes a call held further down this root chat's tree (see `#delegated`); one function per session. */
  #delegateApproval(): NonNullable<ToolContext["delegateApproval"]> {
    this.#delegateApprovalFn ??= (held: HeldApproval, pending: boolean) => {
      if (pending) {
        this.#delegated ??= new Map();
        this.#delegated.set(held.toolCallId, held.holder);
      } else {
        this.#delegated?.delete(held.toolCallId);
        if (this.#delegated?.size === 0) this.#delegated = undefined;
      }
    };
    return this.#delegateApprovalFn;
  }

  /** Builds the session and restores its context from the history. */
  static async create(params: AgentSessionParams): Promise<AgentSession> {
    const agent = new AgentSession(params);
    agent.#manager = await ContextManager.create({
      ...(params.history ? { history: params.history } : {}),
      tokenLimit: params.settings.tokenLimit,
      compactor: (fork, topic, signal) => agent.#compactFork(fork, topic, signal),
    });
    agent.#inherit(params.journal?.approvalRequired ?? []);
    agent.#inherit(params.parked?.approvalRequired ?? []);
    if (params.parked !== undefined) agent.#toolApprovals();
    return agent;
  }

  /**
   * An agent that asked this session (`ask_agent`) needs approval for `toolNames`: so does every
   * later call of this session to them, or asking another agent would get round the approval. The
   * set only grows, and goes with the session's journal and a parked approval to another host.
   */
  inheritApprovals(toolNames: readonly string[]): void {
    this.#inherit(toolNames);
    this.#journal?.requireApproval(toolNames);
  }

  #inherit(toolNames: readonly string[]): void {
    if (toolNames.length === 0) return;
    this.#chatApprovalChain = undefined;
    this.#inherited ??= new Set();
    for (const name of toolNames) this.#inherited.add(name);
  }

  /**
   * The tools needing approval in this session's chain, passed on when it asks another agent: its
   * own list, its tools that may ask for approval, and what it inherited.
   */
  #approvalChain(): string[] {
    const names = new Set([...this.#settings.approvalList, ...(this.#inherited ?? [])]);
    for (const set of this.#toolSets) for (const name of set.approvalTools?.() ?? []) names.add(name);
    return [...names].sort();
  }

  /** The session's journal (its queued chats are journaled by the session's mailbox). */
  get journal(): SessionJournal | undefined {
    return this.#journal;
  }

  /**
   * The chat the session's last host left unfinished goes on, first in the queue. Its
   * calls in flight are settled first (an idempotent one runs again, any other is `interrupted`).
   */
  resumeUnfinishedChat(options: ResumeChatOptions = {}): Promise<boolean> {
    return this.#serialise(async () => {
      const journal = this.#journal;
      const events = this.#events;
      const progress = journal?.unfinishedChat;
      if (journal === undefined || progress === null || progress === undefined) return false;
      if (this.#parked !== undefined) {
        // Its chat waits for an approval: the approval record goes on from there.
        journal.endChat();
        return false;
      }
      events.chatId = progress.chatId;
      const resumed = await settleUnfinishedChat({
        journal,
        history: this.#manager.context.messages,
        isIdempotent: (call) => this.#isIdempotent(call),
        emit: (iteration, body) => events.emit(iteration, body, progress.chatId),
        recordMessage: (message) => this.#deps.recordMessage(message),
        // Its answer has nobody to go to: the tool set that asked stops it (and it, its own).
        stopAskedChat: (call, chat) => {
          for (const set of this.#toolSets) {
            if (set.tools().some((tool) => tool.name === call.name)) set.stopAskedChat?.(chat);
          }
        },
        runTool: (call, iteration) => {
          const actor = createActor(toolCallActor, { input: { call, iteration, deps: this.#deps } });
          actor.start();
          return toPromise(actor);
        },
        onFinished: (result) =>
          options.onOutcome?.({ ok: true, result: { result, usage: emptyUsage(), chatId: progress.chatId } }),
      });
      if (resumed === undefined) return false;
      const chatOptions = {
        ...(options.signal === undefined ? {} : { signal: options.signal }),
        ...(progress.requestId === undefined ? {} : { requestId: progress.requestId }),
      };
      await this.#runChat(resumed.userText, chatOptions, resumed).then(
        (result) => options.onOutcome?.({ ok: true, result }),
        (error: unknown) => options.onOutcome?.({ ok: false, error }),
      );
      return true;
    });
  }

  #isIdempotent(call: ToolCall): boolean {
    return this.#toolSets.some((set) => set.isIdempotent?.(call) === true);
  }

  chat(text: string, options: ChatOptions = {}): Promise<ChatResult> {
    void this.#approvals?.resumeParked().catch(() => {});
    // Behind a mailbox with nothing out of band running, the chat starts here and now.
    if (this.#isOrderedByMailbox && this.#queue === undefined) return this.#runChat(text, options);
    return this.#serialise(() => this.#runChat(text, options));
  }

  compact(topic?: string, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    void this.#approvals?.resumeParked().catch(() => {});
    return this.#serialise(async () => {
      // Stopped while it waited its turn: nothing to do.
      if (options.signal?.aborted) return false;
      this.#events.chatId = this.#createId();
      return this.#manager.compact(topic, options.signal);
    });
  }

  /** `/new` cancels a parked approval first: its chat back-fills, then everything is cleared. */
  async reset(): Promise<void> {
    await (this.#approvals?.cancel() ?? Promise.resolve());
    return this.#serialise(async () => {
      await this.#manager.clear();
      for (const set of this.#toolSets) set.reset();
    });
  }

  delegatedApproval(toolCallId: string): { agent: string; session: string } | undefined {
    return this.#delegated?.get(toolCallId);
  }

  decideToolCall(decision: ToolApprovalDecision): Promise<ApprovalOutcome> {
    return this.#toolApprovals().decide(decision);
  }

  cancelPendingApproval(): Promise<void> {
    return this.#approvals?.cancel() ?? Promise.resolve();
  }

  parkPendingApproval(): Promise<boolean> {
    const parking = this.#approvals?.park() ?? Promise.resolve(false);
    if (this.#parkedAnswer === undefined) return parking;
    return parking.finally(() => {
      // Never brought back here: its record stays for the next host, which answers the id.
      const isStillParked = this.#approvals === undefined || this.#approvals.parked !== undefined;
      if (isStillParked) this.#parkedAnswer?.settle(stillPending());
    });
  }

  parkedChat(): { requestId: string; outcome: Promise<ResumedChatOutcome | undefined> } | undefined {
    const requestId = this.#parked?.requestId;
    if (requestId === undefined) return undefined;
    if (this.#parkedAnswer === undefined) {
      let settle!: (outcome: ResumedChatOutcome | undefined) => void;
      const outcome = new Promise<ResumedChatOutcome | undefined>((resolve) => {
        settle = resolve;
      });
      this.#parkedAnswer = { requestId, outcome, settle };
    }
    return { requestId, outcome: this.#parkedAnswer.outcome };
  }

  get parkedRequestId(): string | undefined {
    return this.#approvals?.parked?.requestId;
  }

  get hasPendingApproval(): boolean {
    return this.#approvals?.isPending ?? false;
  }

  get tokenUsed(): number {
    return this.#manager.context.tokenUsed;
  }

  get contextRatio(): number {
    return this.#manager.contextRatio;
  }

  get messages(): readonly Message[] {
    return this.#manager.context.messages;
  }

  /**
   * Approximately how many bytes the context's messages hold in memory. Kept up to date
   * incrementally: a context that grew by a chat's messages adds theirs; only one that was replaced
   * (a compaction, `/new`, a restore) is measured again.
   */
  get memoryBytes(): number {
    const messages = this.#manager.context.messages;
    const known = this.#measured;
    const length = this.#measuredLength;
    if (messages === known && messages.length === length) return this.#memoryBytes;
    const isGrown =
      messages.length >= length &&
      (length === 0 || (messages[0] === known[0] && messages[length - 1] === known[length - 1]));
    if (isGrown) {
      for (let index = length; index < messages.length; index++) {
        this.#memoryBytes += estimateMessageBytes(messages[index] as Message);
      }
    } else {
      this.#memoryBytes = estimateMessagesBytes(messages);
    }
    this.#measured = messages;
    this.#measuredLength = messages.length;
    return this.#memoryBytes;
  }

  report(body: EventBody): void {
    this.#events.emit(0, body, "");
  }

  reportCancelledChat(text: string, reason: string): void {
    const events = this.#events;
    const chatId = this.#createId();
    events.emit(0, { kind: "ChatStarted", text }, chatId);
    const error = errorInfo("cancelled", reason, { name: ChatCancelledError.name });
    events.emit(0, { kind: "ChatFailed", error, cancelled: true }, chatId);
  }

  /**
   * One operation on the context at a time: later calls wait their turn. Behind a mailbox, which
   * orders its own operations, they wait only for out-of-band work (`outOfBand`: a parked chat
   * resumed by its approval), and do not queue themselves.
   */
  #serialise<T>(task: () => Promise<T>, options: { outOfBand?: boolean } = {}): Promise<T> {
    if (this.#isOrderedByMailbox && options.outOfBand !== true) {
      return this.#queue === undefined ? task() : this.#queue.then(task, task);
    }
    const run = (this.#queue ?? Promise.resolve()).then(task, task);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.#queue = tail;
    // Nothing left to wait for: the next operation need not queue.
    void tail.then(() => {
      if (this.#queue === tail) this.#queue = undefined;
    });
    return run;
  }

  #toolApprovals(): ToolApprovals {
    // The deps object answers for the session (history, events, parked chat, resume, redaction).
    this.#approvals ??= new ToolApprovals(this.#deps);
    return this.#approvals;
  }

  /**
   * Creates a root actor of a bound machine for this session, with its deps in the input (or handed
   * back to a persisted snapshot: a chat parked awaiting approval resumes where it stood).
   */
  #startActor<M extends AnyStateMachine>(
    machine: M,
    input: Omit<InputFrom<M>, "deps">,
    snapshot?: Record<string, unknown>,
  ): Actor<M> {
    const inspector = this.#inspect;
    const reporter = this.#isReportingStates ? createStateReporter(this.#events) : undefined;
    const inspect =
      reporter && inspector
        ? (inspection: InspectionEvent) => {
            reporter(inspection);
            inspector(inspection);
          }
        : (reporter ?? inspector);
    return createActor(machine, {
      input: { ...input, deps: this.#deps },
      ...(snapshot ? { snapshot: withSessionDeps(snapshot, this.#deps) } : {}),
      ...(inspect ? { inspect } : {}),
    } as ActorOptions<M>);
  }

  /** The tools the model may call, added to `options` (the summary request keeps them defined). */
  #withTools(options: LlmOptions): LlmOptions {
    const tools = this.#toolSets.flatMap((set) => set.tools());
    return tools.length > 0 ? { ...options, tools } : options;
  }

  /**
   * The context manager's compactor: the compaction machine on a fork. Its own failures (an empty
   * summary, a failed request) are ContextCompaction events it publishes; anything else that stops
   * it is published here as a failed compaction, never dropped.
   */
  async #compactFork(...[fork, topic, signal]: Parameters<Compactor>): ReturnType<Compactor> {
    const actor = this.#startActor(boundMachines.compaction, {
      messages: fork.messages,
      systemPrompt: this.#settings.systemPrompt,
      // The tools stay defined (with tool_choice none) when the history holds tool calls.
      options: this.#withTools(this.#settings.baseOptions),
      ...(topic ? { topic } : {}),
    });
    const abort = () => actor.stop();
    signal?.addEventListener("abort", abort, { once: true });
    try {
      actor.start();
      const output = await toPromise(actor);
      if (output === undefined) return undefined; // stopped by the signal
      return output.ok ? { messages: output.messages, tokenUsed: output.tokenUsed } : undefined;
    } catch (error) {
      if (!signal?.aborted) {
        this.#events.emit(0, {
          kind: "ContextCompaction",
          phase: "failed",
          error: toErrorInfo(error),
        });
      }
      return undefined;
    } finally {
      signal?.removeEventListener("abort", abort);
    }
  }

  /**
   * `resumed`: a journaled chat goes on (its ChatResumed is already out). The chat's own listener
   * (`onEvent`) is added for as long as it runs: chats run one at a time, so it sees no other's events.
   */
  async #runChat(userText: string, options: ChatOptions, resumed?: ResumedChat): Promise<ChatResult> {
    const { onEvent } = options;
    const listeners = this.#listeners;
    if (onEvent !== undefined) listeners.push(onEvent);
    try {
      const { signal } = options;
      const events = this.#events;
      const toolSets = this.#toolSets;
      const journal = this.#journal;
      const settings = this.#settings;
      // Stored and replayed on every later request: half an emoji must not poison the session.
      const text = toWellFormed(userText);
      if (signal?.aborted) {
        this.reportCancelledChat(text, "the chat was cancelled before it started");
        throw new ChatCancelledError({ prompt: 0, completion: 0, total: 0, cached: 0 });
      }
      events.chatId = resumed?.chatId ?? this.#createId();
      // Listed again for this chat: its tool sets or inherited approvals may have changed since.
      this.#chatApprovalChain = undefined;
      this.#depth = Math.max(options.depth ?? 0, options.lineage?.depth ?? 0);
      this.#lineage = options.lineage;
      this.#deadline = options.deadline ?? options.lineage?.deadline;
      // Every event of this chat names who asked it and the root of its tree.
      events.lineage =
        options.lineage === undefined
          ? undefined
          : { parent: options.lineage.parent, root: options.lineage.root };
      const manager = this.#manager;
      const context = manager.context;
      if (resumed === undefined) {
        events.emit(0, {
          kind: "ChatStarted",
          text,
          ...(options.requestId === undefined ? {} : { requestId: options.requestId }),
          tokenUsed: context.tokenUsed,
          tokenLimit: manager.tokenLimit,
          contextCompactRatio: settings.contextCompactRatio,
          ...(options.traceparent === undefined ? {} : { traceparent: options.traceparent }),
        });
      }
      if (resumed?.continueFrom === undefined && journal !== undefined) {
        journal.beginChat(events.chatId, text, context.messages.length, options.requestId);
        // The model is asked only once the chat is in the journal: a host killed mid-stream then
        // always leaves it to resume, and a retry of its id joins it instead of being refused as
        // "nothing left to resume". One acknowledgement per chat, not per step.
        await journal.flush();
      }
      // The chat's first move (admitting → preparing, or → failed for a spent budget) is a microstep
      // of the start: the state reporter shows it, so `preparing` needs no StateChanged of its own here.
      const actor = this.#startActor(boundMachines.chat, {
        userText: text,
        injections: toolSets.map((set) => set.iterationPromptInjection()).filter((s) => s.trim() !== ""),
        systemPrompt: settings.systemPrompt,
        history: resumed?.continueFrom?.conversation ?? context.messages,
        ...(resumed?.continueFrom ? { resumeFrom: resumed.continueFrom.resumeFrom } : {}),
        options: settings.baseOptions,
        tools: toolSets.flatMap((set) => set.tools()),
        maxIterations: settings.maxIterations,
        tokenLimit: manager.tokenLimit,
        contextCompactRatio: settings.contextCompactRatio,
        tokenUsed: context.tokenUsed,
        ...(this.#checkBudget === undefined ? {} : { budget: this.#checkBudget() }),
      });
      const cancel = () => {
        if (actor.getSnapshot().status === "active") actor.send(chatCancelEvent(actor));
      };
      signal?.addEventListener("abort", cancel, { once: true });
      let output: ChatOutput | undefined;
      let isParked: boolean;
      const approvals = this.#toolApprovals();
      approvals.attach(actor, undefined, options.requestId);
      try {
        actor.start();
        // Cancelled while the journal stored the chat's start (before the listener was there).
        if (signal?.aborted) cancel();
        output = await toPromise(actor);
      } finally {
        signal?.removeEventListener("abort", cancel);
        isParked = await approvals.detach(actor);
        // Ended, or parked with its approval (that record is the one to go on from): nothing to resume.
        // An answer is kept until its reply is stored under the chat's request id (if it has one).
        // Cut off because another host takes the session over: not ended, that host resumes it.
        const isPassedOnChat =
          output?.status !== "done" && (isPassedOn(signal) || output?.error?.code === "lease_lost");
        if (!isPassedOnChat) {
          journal?.endChat(
            !isParked && output?.status === "done"
              ? { result: this.#redactor.redact(output.result), usage: output.usage }
              : undefined,
          );
        }
      }
      if (isParked || output === undefined) {
        // Stopped on shutdown while a tool call awaited approval: the chat goes on after a restart.
        throw new ChatCancelledError(
          { prompt: 0, completion: 0, total: 0, cached: 0 },
          "the host stopped while a tool call awaited approval; the approval stays pending",
        );
      }
      await this.#adopt(output);
      const outcome = this.#outcomeOf(output);
      if (outcome.ok) return outcome.result;
      throw outcome.error;
    } finally {
      if (onEvent !== undefined) listeners.splice(listeners.indexOf(onEvent), 1);
      this.#events.lineage = undefined;
      this.#lineage = undefined;
      this.#deadline = undefined;
      this.#delegated = undefined;
      this.#chatApprovalChain = undefined;
    }
  }

  /**
   * How a chat ended, as its request's answer: the result, or the error its caller gets. It leaves
   * the process (a reply, stdout) as the events do: without secrets (a provider's error may quote
   * the key it was sent).
   */
  #outcomeOf(output: ChatOutput): ResumedChatOutcome {
    if (output.status === "done") {
      const result = this.#redactor.redact(output.result);
      return { ok: true, result: { result, usage: output.usage, chatId: this.#events.chatId } };
    }
    if (output.status === "cancelled") return { ok: false, error: new ChatCancelledError(output.usage) };
    const error = output.error ?? errorInfo("internal", "the chat failed", { name: "Error" });
    return { ok: false, error: new ChatFailedError(this.#redactor.redactValue(error), output.usage) };
  }

  /** The context becomes what the chat ended with. */
  async #adopt(output: ChatOutput): Promise<void> {
    const context = this.#manager.context;
    const history = this.#history;
    context.messages = output.messages;
    context.tokenUsed = output.tokenUsed;
    if (output.status !== "done" && history) {
      // A chat that did not end well may not have been persisted: the history is the truth.
      context.messages = await history.restore().catch(() => context.messages);
    }
  }

  /**
   * A chat parked awaiting approval comes back from its persisted snapshot, first in the queue.
   * Its requester is gone: it ends in the history and the events, and its answer goes to a retry of
   * its request id (see {@link parkedChat}).
   */
  #resumeChat(pending: PendingApproval): Promise<void> {
    const approvals = this.#toolApprovals();
    return new Promise<void>((attached, fail) => {
      void this.#serialise(
        async () => {
          let actor: Actor<typeof boundMachines.chat>;
          try {
            this.#events.chatId = pending.chatId;
            // Listed again for this chat, as for any chat: its tool sets may have changed since.
            this.#chatApprovalChain = undefined;
            actor = this.#startActor(
              boundMachines.chat,
              undefined as never,
              upgradeChatSnapshot(pending.snapshot),
            );
            approvals.attach(actor, pending);
            actor.start();
          } catch (error) {
            // A snapshot this code cannot restore: the approval is spent.
            await this.#history?.takePendingApproval?.().catch(() => false);
            const failure = new HistoryError(
              `the pending approval cannot be restored: ${describeError(error)}`,
              {
                cause: error,
              },
            );
            this.#parkedAnswer?.settle({ ok: false, error: failure });
            fail(failure);
            return;
          }
          attached();
          let output: ChatOutput | undefined;
          let isParked = false;
          try {
            output = await toPromise(actor);
          } catch (error) {
            this.#parkedAnswer?.settle({ ok: false, error });
            throw error;
          } finally {
            isParked = await approvals.detach(actor);
          }
          // Parked again (this host stops): the next host answers the request id.
          this.#parkedAnswer?.settle(
            isParked ? stillPending() : output === undefined ? undefined : this.#outcomeOf(output),
          );
          if (output !== undefined) await this.#adopt(output);
        },
        { outOfBand: true },
      ).catch(() => {});
    });
  }
}

/**
 * The answer for a retry that waited on a chat parked awaiting approval when this host stops
 * before the decision: `unavailable` (retryable), since the approval stays pending and the
 * session's next host takes the retry's id up again.
 */
function stillPending(): ResumedChatOutcome {
  return {
    ok: false,
    error: new UnavailableError(
      "the host stopped while a tool call awaited approval; the approval stays pending, and a retry of this id on the session's next host waits for it",
    ),
  };
}
