import { type Actor, createActor } from "xstate";
import {
  createMailboxDeps,
  type MailboxDeps,
  type MessageOptions,
  mailboxOperation,
} from "../../actors/mailbox-operation.js";
import {
  type DropReason,
  MAILBOX_LIMIT,
  type MailboxMessage,
  type MessageOutput,
  type SessionMachineEmitted,
  sessionMachine,
} from "../../machines/session.machine.js";
import type { Agent, ChatOptions, ChatResult, ResumedChatOutcome } from "../agent/agent-types.js";
import { ChatPassedOnError } from "../agent/chat-cancel.js";
import type { ToolApprovalDecision } from "../agent/tool-approvals.js";
import type { ChatRequest } from "../bus/contract.js";
import type { TokenUsage } from "../llm/types.js";
import { describeFailure, type SessionError } from "./describe-failure.js";

/** The answer to a chat message (tagged by `ok`): the chat's result, or why it did not complete. */
export type ChatOutcome =
  | { ok: true; result: string; usage: TokenUsage; chatId?: string }
  | { ok: false; error: SessionError };

/** The answer to a command (`new`, `compact`, `stop`). */
export type CommandOutcome = { ok: true } | { ok: false; error: SessionError };

/**
 * A chat request handed to the session: the wire request's text and queueing (`type`, default
 * "user"; `stackable`, default false: a stackable message coalesces with a queued one of the same
 * type, which is answered `cancelled`), and the agent's per-chat options. Its `signal` cancels this
 * chat only (skipped if still queued, aborted if running); its `onEvent` sees this chat's events.
 */
export type SessionChatRequest = Pick<ChatRequest, "text"> &
  Partial<Pick<ChatRequest, "type" | "stackable">> &
  ChatOptions & {
    /**
     * Aborted: this chat is no longer wanted. Still queued, it is taken out at once (answered
     * `cancelled`, it never runs) and the rest of the queue goes on. Cancelling it while it runs is
     * `signal`'s part.
     */
    withdraw?: AbortSignal;
  };

export interface SessionActorOptions {
  agent: Agent;
  /** Mailbox limit; default 200. */
  maxQueue?: number;
  /** Injected clock (ms since the epoch) for idleness. */
  now?: () => number;
  /** Message ids; default a counter. */
  createId?: () => string;
  /**
   * How long the mailbox actor outlives the session's last message, in ms: a session busy again
   * within it goes on with the same actor. Default {@link MAILBOX_LINGER_MS}.
   */
  mailboxLingerMs?: number;
  /**
   * Bytes the agent's messages may hold in memory: over it, the session is compacted before its
   * next chat, which is refused (`session_too_large`) if that does not bring it under. Default: no limit.
   */
  maxSessionBytes?: number;
}

/**
 * A chat resumed from the journal that carries its client's request `id`: `outcome`
 * resolves with its answer, or undefined when nothing was left to run (no answer is known).
 */
export type ResumedRequestHandler = (requestId: string, outcome: Promise<ChatOutcome | undefined>) => void;

type Settlement = { ok: true; output: MessageOutput } | { ok: false; error: SessionError };

interface Waiter {
  /** Resolves the caller's promise with what {@link answer} made of the settlement. */
  settle(answer: unknown): void;
  /** The caller's answer made of how its message settled, in the same step (a chat's `ChatOutcome`). */
  answer(settlement: Settlement): unknown;
  /** Passivation's own compaction does not count as activity. */
  touches: boolean;
  /** A chat message's text (reported as a cancelled chat if it never runs). */
  chatText: string | undefined;
}

/** How a chat message settled, as its caller's answer. */
function chatOutcomeOfSettlement(settlement: Settlement): ChatOutcome {
  if (!settlement.ok) return settlement;
  if (settlement.output.kind !== "chat") {
    return {
      ok: false,
      error: { code: "internal", message: `a chat answered as ${settlement.output.kind}` },
    };
  }
  return chatAnswer(settlement.output);
}

/** A chat's result as its answer (`chatId` only when known). */
function chatAnswer({ result, usage, chatId }: ChatResult): ChatOutcome {
  return chatId === undefined ? { ok: true, result, usage } : { ok: true, result, usage, chatId };
}

/** A resumed chat's outcome as a chat message's answer. */
function chatOutcomeOf(outcome: ResumedChatOutcome): ChatOutcome {
  return outcome.ok ? chatAnswer(outcome.result) : { ok: false, error: describeFailure(outcome.error) };
}

let nextActorNumber = 0;

/** The session machine bound to the mailbox actor once per process (never per session). */
const boundSessionMachine = sessionMachine.provide({ actors: { runMessage: mailboxOperation } });

/** The session machine's initial state, where an idle session's mailbox is (or would be). */
const IDLE = "idle";

/**
 * How long an idle session keeps its mailbox actor by default. Starting one costs tens of µs of
 * CPU (mostly allocation) at every message that finds the session without one: a session that
 * chats back to back keeps it, one that waits for its next message longer than this gives it up.
 */
export const MAILBOX_LINGER_MS = 1_000;

/**
 * One session as an actor: the session machine (the mailbox, the session's one queue) in front of
 * one agent, plus the callers waiting for answers. The machine holds only serialisable message
 * data; the waiters live here, keyed by message id, and are answered from what the machine emits.
 *
 * The session hands the mailbox what it runs messages on once, at creation: its agent, in the
 * machine's `input.deps` ({@link MailboxDeps}). The mailbox's actor (actors/mailbox-operation.ts)
 * calls the agent itself; nothing comes back into this class but the machine's emitted answers.
 *
 * An idle session holds no mailbox actor (heap per idle session is a benchmarked figure): the
 * machine's actor is started at a message that finds none, and dropped once it has been back in
 * `idle` (nothing running, nothing queued) for a while, so the next message starts a fresh one.
 * An idle mailbox is all initial state (`idle`, empty queue), so a fresh actor is the same
 * mailbox; the session's StateChanged stream does not see the swap ({@link SessionActor.#startMailbox}).
 *
 * The mailbox runs one message at a time. On `stop` it answers at once but takes the next message
 * only once the stopped operation has settled (its history written), so the agent never sees two
 * operations at once and needs no queue of its own.
 */
export class SessionActor {
  readonly agent: Agent;
  /** What the mailbox runs its messages on (see {@link MailboxDeps}). */
  readonly #deps: MailboxDeps & { options: Map<string, MessageOptions> | undefined };
  /** The mailbox while it has work (and once stopped); undefined while the session is idle. */
  #actor: Actor<typeof sessionMachine> | undefined;
  readonly #maxQueue: number | undefined;
  readonly #mailboxLingerMs: number;
  /** Drops the mailbox once it has been idle for {@link #mailboxLingerMs} (see {@link #startMailbox}). */
  #dropTimer: ReturnType<typeof setTimeout> | undefined;
  // What an idle session does not need is created at its first message (heap per idle session is
  // a benchmarked figure): the waiters, the idle waiters.
  #waiters: Map<string, Waiter> | undefined;
  readonly #now: () => number;
  /** Message ids: the injected generator, else this actor's prefix and a counter. */
  readonly #createId: (() => string) | undefined;
  readonly #idPrefix: string;
  #idCounter = 0;
  #lastActivityAt: number;
  #hasHadMessages = false;
  #cancelReason = "cancelled by stop";
  /** The code the chats a stop cuts off are answered with (see {@link shutdown}). */
  #cancelCode: "cancelled" | "unavailable" = "cancelled";
  #idleWaiters: (() => void)[] | undefined;
  /** Told the session's memory estimate each time it changed (see {@link onMemoryChanged}). */
  #memoryListener: ((bytes: number, actor: SessionActor) => void) | undefined;
  #reportedBytes = 0;

  constructor(options: SessionActorOptions) {
    const { agent } = options;
    this.agent = agent;
    this.#deps = createMailboxDeps({
      agent,
      options: undefined,
      started: undefined,
      ...(options.maxSessionBytes === undefined ? {} : { maxSessionBytes: options.maxSessionBytes }),
    }) as MailboxDeps & { options: Map<string, MessageOptions> | undefined };
    this.#now = options.now ?? Date.now;
    this.#idPrefix = `m${nextActorNumber++}-`;
    this.#createId = options.createId;
    this.#lastActivityAt = this.#now();
    this.#maxQueue = options.maxQueue;
    this.#mailboxLingerMs = options.mailboxLingerMs ?? MAILBOX_LINGER_MS;
    // What starting the mailbox reported: its initial state (the actor itself waits for a message).
    agent.report?.({ kind: "StateChanged", machine: "session", state: IDLE });
  }

  /** The session machine's actor, input as this session's. */
  #createMailbox(): Actor<typeof sessionMachine> {
    const maxQueue = this.#maxQueue;
    return createActor(boundSessionMachine, {
      input: maxQueue === undefined ? { deps: this.#deps } : { maxQueue, deps: this.#deps },
    });
  }

  /**
   * The mailbox, started if the session had none: it starts in `idle`, where the session already
   * is, so its StateChanged stream goes on from there (no second `idle`). Back in `idle`, it is
   * dropped if it is still idle {@link #mailboxLingerMs} later (never in the middle of a step).
   */
  #startMailbox(): Actor<typeof sessionMachine> {
    if (this.#actor !== undefined) return this.#actor;
    const actor = this.#createMailbox();
    this.#actor = actor;
    actor.on("*", (event) => this.#answer(event));
    let lastState: unknown = IDLE;
    actor.subscribe({
      next: (snapshot) => {
        // The session machine's own StateChanged, on the session's event stream (live diagram).
        if (snapshot.value !== lastState) {
          lastState = snapshot.value;
          // Each step of the mailbox may follow an operation that changed the context.
          this.#reportMemory();
          this.agent.report?.({ kind: "StateChanged", machine: "session", state: snapshot.value });
          if (snapshot.value === IDLE && snapshot.status === "active") this.#dropWhenStillIdle();
        }
        if (snapshot.value === IDLE || snapshot.status !== "active") this.#releaseIdleWaiters();
      },
      error: () => this.#releaseIdleWaiters(),
    });
    actor.start();
    return actor;
  }

  /** (Re)arms the timer that drops the mailbox; one timer per session, refreshed at each idle. */
  #dropWhenStillIdle(): void {
    if (this.#dropTimer !== undefined) {
      this.#dropTimer.refresh();
      return;
    }
    this.#dropTimer = setTimeout(() => {
      this.#dropTimer = undefined;
      const snapshot = this.#actor?.getSnapshot();
      // Busy again: its next return to idle arms a new timer. Stopped: kept, it answers for the session.
      if (snapshot?.value === IDLE && snapshot.status === "active") this.#actor = undefined;
    }, this.#mailboxLingerMs);
    // An idle session's mailbox keeps no process alive.
    this.#dropTimer.unref?.();
  }

  /** Answers the waiters from what the machine emits. */
  #answer(event: SessionMachineEmitted): void {
    if (event.type === "message.completed") {
      this.#settle(event.id, { ok: true, output: event.output });
    } else if (event.type === "message.failed") {
      this.#settle(event.id, { ok: false, error: describeFailure(event.error) });
    } else {
      const error = this.#dropError(event.reason);
      // Chats cut off because this host lost the session stay in its journal: the next owner runs them.
      if (error.code !== "unavailable") this.agent.journal?.take(event.ids);
      for (const id of event.ids) {
        // A queued chat that will never run still shows as a chat in the events.
        const text = this.#waiters?.get(id)?.chatText;
        if (text !== undefined && this.#deps.started?.has(id) !== true)
          this.#reportCancelledChat(text, error.message);
        this.#settle(id, { ok: false, error });
      }
    }
  }

  get name(): string {
    return this.agent.name;
  }

  get session(): string {
    return this.agent.session;
  }

  /** Approximately how many bytes the agent's messages hold in memory (0 when the agent does not say). */
  get memoryBytes(): number {
    return this.agent.memoryBytes ?? 0;
  }

  /**
   * Calls `listener` with {@link memoryBytes} whenever it changed, checked at each step of the
   * mailbox (one listener: the host's accounting), and this session, so one listener can serve
   * every session.
   */
  onMemoryChanged(listener: (bytes: number, actor: SessionActor) => void): void {
    this.#memoryListener = listener;
    this.#reportedBytes = this.memoryBytes;
  }

  #reportMemory(): void {
    if (this.#memoryListener === undefined) return;
    const bytes = this.memoryBytes;
    if (bytes === this.#reportedBytes) return;
    this.#reportedBytes = bytes;
    this.#memoryListener(bytes, this);
  }

  /** The mailbox state: idle, processing, compacting, resetting or stopped. */
  get state(): string {
    return this.#actor === undefined ? IDLE : String(this.#actor.getSnapshot().value);
  }

  /** Nothing running and nothing queued. */
  get isIdle(): boolean {
    return this.#actor === undefined || this.#actor.getSnapshot().value === IDLE;
  }

  get isStopped(): boolean {
    return this.#actor !== undefined && this.#actor.getSnapshot().status !== "active";
  }

  /** Messages waiting behind the running one. */
  get queueLength(): number {
    return this.#actor === undefined ? 0 : this.#actor.getSnapshot().context.queue.length;
  }

  /** When a message last arrived or was answered (passivation's own compaction excluded). */
  get lastActivityAt(): number {
    return this.#lastActivityAt;
  }

  /** Whether a message (passivation's own compaction aside) was ever queued: false for a session still on its way to its first caller. */
  get hasHadMessages(): boolean {
    return this.#hasHadMessages;
  }

  /**
   * The machine's persisted snapshot as plain JSON (the queue and the running message; not the
   * session itself). An idle session's is that of a mailbox not started yet: its initial state.
   */
  getPersistedSnapshot(): unknown {
    const actor = this.#actor ?? this.#createMailbox();
    // The deps' `toJSON` leaves them out.
    return JSON.parse(JSON.stringify(actor.getPersistedSnapshot()));
  }

  /** Queues a chat message; resolves with its result, or why it was not processed. */
  chat(request: SessionChatRequest): Promise<ChatOutcome> {
    let messageId: string | undefined;
    const outcome = this.#enqueue(
      (id) => {
        messageId = id;
        return {
          kind: "chat",
          id,
          text: request.text,
          type: request.type ?? "user",
          stackable: request.stackable ?? false,
          depth: request.depth ?? 0,
        };
      },
      true,
      {
        signal: request.signal,
        onEvent: request.onEvent,
        requestId: request.requestId,
        lineage: request.lineage,
        traceparent: request.traceparent,
        deadline: request.deadline,
      },
      // Made the caller's answer where the mailbox settles it, not in a step of its own.
      chatOutcomeOfSettlement,
    );
    const { withdraw } = request;
    const id = messageId;
    if (withdraw !== undefined && id !== undefined) {
      const takeOut = () => this.#actor?.send({ type: "withdraw", id });
      if (withdraw.aborted) takeOut();
      else {
        withdraw.addEventListener("abort", takeOut, { once: true });
        void outcome.finally(() => withdraw.removeEventListener("abort", takeOut));
      }
    }
    return outcome;
  }

  /** `chatAndWait`: a message that is never coalesced, resolved with the chat's result. */
  chatAndWait(text: string, options: { depth?: number } = {}): Promise<ChatOutcome> {
    return this.chat({
      text,
      stackable: false,
      ...(options.depth === undefined ? {} : { depth: options.depth }),
    });
  }

  /** Fire-and-forget (ToolContext.post): background task results arrive this way. */
  post(text: string, options: { type?: string; stackable?: boolean } = {}): void {
    void this.chat({ text, ...options });
  }

  /** Queues `/compact [topic]`. `touch: false` (passivation) does not count as activity. */
  compact(topic?: string, options: { touch?: boolean } = {}): Promise<CommandOutcome> {
    const touches = options.touch ?? true;
    return this.#enqueue(
      (id) => (topic === undefined ? { kind: "compact", id } : { kind: "compact", id, topic }),
      touches,
    ).then((settlement) => {
      if (!settlement.ok) return settlement;
      if (settlement.output.kind === "compact" && settlement.output.compacted) return { ok: true };
      return {
        ok: false,
        error: {
          code: "llm_error",
          message: "compaction failed: the summary was empty or the request failed",
        },
      };
    });
  }

  /** Queues `/new`: clears context, history and ToolSet state. */
  reset(): Promise<CommandOutcome> {
    return this.#enqueue((id) => ({ kind: "new", id }), true).then((settlement) =>
      settlement.ok ? { ok: true } : settlement,
    );
  }

  /**
   * Out of band: cancels the running chat or compaction and answers every queued message
   * `cancelled`; a chat awaiting a tool approval is cancelled too (parked ones included).
   */
  stop(): CommandOutcome {
    this.#lastActivityAt = this.#now();
    this.#cancelReason = "cancelled by stop";
    // An idle mailbox ignores `stop`: without one there is nothing to send it to.
    this.#actor?.send({ type: "stop" });
    void this.agent.cancelPendingApproval?.().catch(() => {});
    return { ok: true };
  }

  /** A chat of this session waits for a tool approval: the session is not passivated. */
  get hasPendingApproval(): boolean {
    return this.agent.hasPendingApproval === true;
  }

  /** Out of band: approves or denies a tool call the session's chat holds (`approve` / `deny`). */
  async decideToolCall(decision: ToolApprovalDecision): Promise<CommandOutcome> {
    this.#lastActivityAt = this.#now();
    if (this.agent.decideToolCall === undefined) {
      return { ok: false, error: { code: "bad_request", message: "this agent takes no tool approvals" } };
    }
    const outcome = await this.agent.decideToolCall(decision);
    this.#lastActivityAt = this.#now();
    return outcome.ok
      ? { ok: true }
      : { ok: false, error: { code: "bad_request", message: outcome.message } };
  }

  /**
   * Shutdown's first step: a chat awaiting a tool approval is stopped where it stands, its
   * approval kept in the history for the session's next life (its caller is answered `cancelled`).
   */
  parkPendingApproval(): Promise<unknown> {
    return this.agent.parkPendingApproval?.().catch(() => false) ?? Promise.resolve();
  }

  /**
   * Finishes what the session's last host left unfinished — the chat it was running
   * (first), then the chats that were queued, in order, as new messages of this mailbox. Nobody
   * waits for their answers here; those that carry a client request id are handed to `onResumed`
   * (before this returns), so retries of that id can join them. So is a chat the last host left
   * awaiting a tool approval: its id's retries wait until it is decided and the chat ends. `stop`
   * and shutdown cancel the resumed chat like a running one.
   */
  resumeUnfinished(options: { onResumed?: ResumedRequestHandler } = {}): Promise<void> {
    const { agent } = this;
    const { onResumed } = options;
    if (this.isStopped) return Promise.resolve();
    // A chat left awaiting a tool approval: retries of its id wait for it to be decided and end.
    const parked = onResumed === undefined ? undefined : agent.parkedChat?.();
    if (parked !== undefined) {
      onResumed?.(
        parked.requestId,
        parked.outcome.then((outcome) => (outcome === undefined ? undefined : chatOutcomeOf(outcome))),
      );
    }
    if (agent.journal === undefined || agent.resumeUnfinishedChat === undefined) return Promise.resolve();
    // Answers the last host had not stored under their request ids yet.
    for (const answered of agent.journal.answered) {
      const { requestId, result, usage, chatId } = answered;
      if (onResumed === undefined) agent.journal.forgetAnswer(requestId);
      else onResumed(requestId, Promise.resolve({ ok: true, result, usage, chatId }));
    }
    // The journal shows that same chat as unfinished: its record above is the one to go on from.
    const unfinishedId = agent.journal.unfinishedChat?.requestId;
    const requestId = unfinishedId === parked?.requestId ? undefined : unfinishedId;
    let answered: (outcome: ChatOutcome | undefined) => void = () => {};
    if (requestId !== undefined && onResumed !== undefined) {
      onResumed(
        requestId,
        new Promise((resolve) => {
          answered = resolve;
        }),
      );
    }
    const queued = agent.journal.takeQueued();
    // First in the mailbox: it runs before the chats that were queued behind it.
    const resuming = this.#enqueue((id) => ({ kind: "resume", id }), false, {
      onOutcome: (outcome) => answered(chatOutcomeOf(outcome)),
    });
    for (const request of queued) {
      const outcome = this.chat({
        text: request.text,
        ...(request.type === undefined ? {} : { type: request.type }),
        ...(request.stackable === undefined ? {} : { stackable: request.stackable }),
        ...(request.depth === undefined ? {} : { depth: request.depth }),
        ...(request.requestId === undefined ? {} : { requestId: request.requestId }),
      });
      if (request.requestId !== undefined) onResumed?.(request.requestId, outcome);
    }
    return resuming.then(() => answered(undefined));
  }

  /** Resolves once nothing is running or queued (or the session has stopped). */
  whenIdle(): Promise<void> {
    if (this.isIdle || this.isStopped) return Promise.resolve();
    return new Promise((resolve) => {
      this.#idleWaiters ??= [];
      this.#idleWaiters.push(resolve);
    });
  }

  /**
   * Stops the session: what runs is cancelled, what waits is answered `cancelled`. Resolves when the
   * agent's last operation has settled, so nothing is left half-written.
   */
  async shutdown(
    reason = "the session was shut down",
    code: "cancelled" | "unavailable" = "cancelled",
  ): Promise<void> {
    const parking = this.parkPendingApproval();
    if (!this.isStopped) {
      this.#cancelReason = reason;
      this.#cancelCode = code;
      // Another host takes the session over: what runs here is cut off, not ended.
      if (code === "unavailable") this.#deps.passedOn = new ChatPassedOnError(reason);
      // Started if the session was idle: the mailbox's `stopped` is the session's last StateChanged.
      this.#startMailbox().send({ type: "shutdown" });
    }
    clearTimeout(this.#dropTimer);
    this.#dropTimer = undefined;
    // The mailbox reaches `stopped` once its running operation has settled.
    const actor = this.#actor;
    if (actor !== undefined && actor.getSnapshot().status === "active") {
      await new Promise<void>((resolve) => actor.subscribe({ complete: resolve, error: () => resolve() }));
    }
    await parking;
  }

  /**
   * Queues a message; resolves with `answer` of how it settled (default: the settlement itself),
   * made in the step that settles it.
   */
  #enqueue<T = Settlement>(
    build: (id: string) => MailboxMessage,
    touches: boolean,
    options?: MessageOptions,
    answer: (settlement: Settlement) => T = (settlement) => settlement as T,
  ): Promise<T> {
    if (this.isStopped) {
      return Promise.resolve(
        answer({ ok: false, error: { code: "cancelled", message: "the session is stopped" } }),
      );
    }
    if (touches) {
      this.#lastActivityAt = this.#now();
      this.#hasHadMessages = true;
    }
    const message = build(this.#createId?.() ?? `${this.#idPrefix}${++this.#idCounter}`);
    if (message.kind === "chat") {
      const { id, text, type, stackable, depth } = message;
      const requestId = options?.requestId;
      this.agent.journal?.enqueue({
        id,
        text,
        type,
        stackable,
        depth,
        ...(requestId === undefined ? {} : { requestId }),
      });
    }
    return new Promise<T>((resolve) => {
      const chatText = message.kind === "chat" ? message.text : undefined;
      this.#waiters ??= new Map();
      this.#waiters.set(message.id, {
        settle: resolve as (answer: unknown) => void,
        answer,
        touches,
        chatText,
      });
      if (options !== undefined) {
        this.#deps.options ??= new Map();
        this.#deps.options.set(message.id, options);
      }
      this.#startMailbox().send({ type: "enqueue", message });
    });
  }

  #settle(id: string, settlement: Settlement): void {
    const waiter = this.#waiters?.get(id);
    if (waiter === undefined) return;
    this.#waiters?.delete(id);
    // An idle session holds no empty map.
    if (this.#waiters?.size === 0) this.#waiters = undefined;
    this.#deps.options?.delete(id);
    if (this.#deps.options?.size === 0) this.#deps.options = undefined;
    if (waiter.touches) this.#lastActivityAt = this.#now();
    waiter.settle(waiter.answer(settlement));
  }

  #dropError(reason: DropReason): SessionError {
    if (reason === "queue_overflow") {
      return {
        code: "queue_overflow",
        message: `dropped: more than ${this.#maxQueue ?? MAILBOX_LIMIT} messages were queued for the session`,
      };
    }
    if (reason === "superseded") {
      return { code: "cancelled", message: "superseded by a newer stackable message of the same type" };
    }
    if (reason === "withdrawn") return { code: "cancelled", message: "cancelled before it started" };
    return { code: this.#cancelCode, message: this.#cancelReason };
  }

  /** Best-effort, like every event: a failing report never disturbs the mailbox. */
  #reportCancelledChat(text: string, reason: string): void {
    try {
      this.agent.reportCancelledChat?.(text, reason);
    } catch {
      // Events are observability; the caller is answered all the same.
    }
  }

  #releaseIdleWaiters(): void {
    const waiters = this.#idleWaiters ?? [];
    this.#idleWaiters = undefined;
    for (const resolve of waiters) resolve();
  }
}
