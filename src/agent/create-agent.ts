import pLimit from "p-limit";
import {
  type Actor,
  type ActorOptions,
  type AnyStateMachine,
  assign,
  createActor,
  type InputFrom,
  type InspectionEvent,
  toPromise,
} from "xstate";
import { createCompactionRequestActor } from "../../actors/compaction-request.js";
import { createEventEmitter } from "../../actors/event-publisher.js";
import { createAppendHistoryActor, createReplaceHistoryActor } from "../../actors/history-writer.js";
import { createModelStreamActor } from "../../actors/model-stream.js";
import { bindSessionDeps, type SessionDeps, sessionDepsOf } from "../../actors/session-deps.js";
import { createToolCallActor } from "../../actors/tool-call.js";
import { type ChatOutput, chatMachine } from "../../machines/chat.machine.js";
import { compactionMachine } from "../../machines/compaction.machine.js";
import { iterationMachine } from "../../machines/iteration.machine.js";
import { ContextManager } from "../context/context-manager.js";
import type { PendingApproval } from "../context/pending-approval.js";
import type { AgentEvent } from "../events/types.js";
import { type ResumedChat, settleUnfinishedChat } from "../journal/resume-chat.js";
import { SessionJournal } from "../journal/session-journal.js";
import type { LlmOptions, Message, ToolCall } from "../llm/types.js";
import { toWellFormed } from "../llm/well-formed-message.js";
import { createAgentTracing } from "../telemetry/agent-tracing.js";
import { NO_SECRETS } from "../text/secret-redactor.js";
import type { ToolSet } from "../tools/tool-set.js";
import type { Agent, AgentOptions, ChatOptions, ChatResult, CreateAgentParams } from "./agent-types.js";
import { ChatCancelledError, ChatFailedError } from "./chat-errors.js";
import { ToolApprovals } from "./tool-approvals.js";

export const DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant.";
export const DEFAULT_MAX_ITERATIONS = 20;
export const DEFAULT_CONTEXT_COMPACT_RATIO = 0.7;
export const DEFAULT_TOKEN_LIMIT = 128_000;
export const DEFAULT_MAX_CONCURRENT_TOOL_CALLS = 4;

/**
 * The machines bound to their actors and actions once per process. Each root actor registers its
 * session's {@link SessionDeps} under its actor system, where the actors and actions look them up:
 * an idle session holds no machine copies.
 */
export const boundMachines = (() => {
  const compaction = compactionMachine.provide({
    actions: { report: ({ system }, body) => sessionDepsOf(system).events.emit(0, body) },
    actors: {
      requestSummary: createCompactionRequestActor(),
      replaceHistory: createReplaceHistoryActor(),
    },
  });
  const iteration = iterationMachine.provide({
    actions: {
      recordMessages: ({ system }, { messages }) => {
        const { recordMessage } = sessionDepsOf(system);
        for (const message of messages) recordMessage(message);
      },
      selectApprovals: assign({
        awaitingApproval: ({ context, system }) => {
          const { needsApproval } = sessionDepsOf(system);
          return context.toolCalls.filter((call) => needsApproval(call)).map((call) => call.id);
        },
      }),
      announceApprovals: ({ context, system }, { requests }) =>
        sessionDepsOf(system).announceApprovals(context.iteration, requests),
      noteDecision: ({ context, system }, decision) =>
        sessionDepsOf(system).events.emit(context.iteration, { kind: "ToolApprovalResolved", ...decision }),
    },
    actors: { streamModel: createModelStreamActor(), runToolCall: createToolCallActor() },
  });
  const chat = chatMachine.provide({
    actions: {
      report: ({ system }, { iteration: number, body }) => sessionDepsOf(system).events.emit(number, body),
      recordMessages: ({ system }, { messages }) => {
        const { recordMessage } = sessionDepsOf(system);
        for (const message of messages) recordMessage(message);
      },
    },
    actors: {
      runIteration: iteration,
      compactContext: compaction,
      appendHistory: createAppendHistoryActor(),
    },
  });
  return { chat, iteration, compaction };
})();

/** The system prompt: the agent's own, then each ToolSet's static prompt (SPEC §8). */
export function buildSystemPrompt(systemPrompt: string, toolSets: readonly ToolSet[]): string {
  const prompts = toolSets.map((set) => set.prompt().trim()).filter((text) => text !== "");
  return [systemPrompt, ...prompts].join("\n\n");
}

/** Runs a call left in flight by a stopped host (issue 11), as the iteration would. */
const resumedToolCall = createToolCallActor();

/** The approval list of an agent that has none (shared: one empty set per process, not per session). */
const NO_TOOL_NAMES: ReadonlySet<string> = new Set();

function describeError(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function swallow<A extends unknown[]>(callback: ((...args: A) => void) | undefined): (...args: A) => void {
  if (!callback) return () => {};
  return (...args) => {
    try {
      callback(...args);
    } catch {
      // Callbacks are best-effort by contract (SPEC §8).
    }
  };
}

/**
 * Builds an agent session: the composition root where a session's dependencies meet the bound
 * machines ({@link boundMachines}), and the one place that owns the session's context.
 */
export async function createAgent(params: CreateAgentParams): Promise<Agent> {
  const options: AgentOptions = params.options ?? {};
  const name = params.name ?? "agent";
  const session = params.session ?? "default";
  const createId = params.createId ?? (() => crypto.randomUUID());
  const toolSets = (params.toolSets ?? []).map((set) => set.copy());
  const systemPrompt = buildSystemPrompt(options.systemPrompt ?? DEFAULT_SYSTEM_PROMPT, toolSets);
  const maxIterations = options.maxIterations ?? DEFAULT_MAX_ITERATIONS;
  const contextCompactRatio = options.contextCompactRatio ?? DEFAULT_CONTEXT_COMPACT_RATIO;
  const onMessageRecorded = swallow(options.onMessageRecorded);
  const redactor = params.redactor ?? NO_SECRETS;
  const listeners: Array<(event: AgentEvent) => void> = [];
  if (options.onLog) listeners.push(options.onLog);
  // StateChanged (an inspector on every machine) is for the log: spans need no states.
  const isReportingStates = listeners.length > 0;
  // Spans are built from the events (src/telemetry); untraced, the session gets no listener at all.
  const tracing = createAgentTracing({
    agent: name,
    session,
    model: params.model,
    llm: params.llm,
    ...params.tracing,
  });
  if (tracing) listeners.push(tracing.listener);
  const { history } = params;
  const events = createEventEmitter({
    agent: name,
    session,
    listeners,
    redactor,
    ...(params.now ? { now: params.now } : {}),
    // seq goes on from where the session's last instance left it (passivation, restart).
    ...(history?.loadSeq && history.saveSeq
      ? {
          lastSeq: await history.loadSeq(),
          reserveSeq: (mark: number) => void history.saveSeq?.(mark).catch(() => {}),
        }
      : {}),
  });
  let depth = 0;

  const baseOptions: LlmOptions = {
    model: params.model,
    ...(options.maxOutputTokens !== undefined ? { maxTokens: options.maxOutputTokens } : {}),
    ...(options.reasoningEffort !== undefined ? { reasoningEffort: options.reasoningEffort } : {}),
    ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
    ...(options.promptCaching ? { promptCaching: true } : {}),
    ...(options.streamIdleTimeoutMs !== undefined
      ? { streamIdleTimeoutMs: options.streamIdleTimeoutMs }
      : {}),
  };

  const withTools = (options: LlmOptions): LlmOptions => {
    const tools = toolSets.flatMap((set) => set.tools());
    return tools.length > 0 ? { ...options, tools } : options;
  };

  const approvalList: ReadonlySet<string> =
    options.needsApproval !== undefined && options.needsApproval.length > 0
      ? new Set(options.needsApproval)
      : NO_TOOL_NAMES;
  const parked = await params.history?.loadPendingApproval?.();
  // Built at the session's first chat or decision (at once when a parked approval waits), so an
  // idle session pays nothing for approvals (heap per idle session is a benchmarked figure).
  let approvalsOfSession: ToolApprovals | undefined;
  const approvals = (): ToolApprovals => {
    approvalsOfSession ??= new ToolApprovals({
      history: params.history,
      events,
      redact: (text) => redactor.redact(text),
      parked,
      resume: (pending) => resumeChat(pending),
    });
    return approvalsOfSession;
  };
  if (parked !== undefined) approvals();
  // Issue 11: the session's unfinished work, journaled step by step.
  const journal = params.journal ? await SessionJournal.open(params.journal, name, session) : undefined;
  const isIdempotent = (call: ToolCall) => toolSets.some((set) => set.isIdempotent?.(call) === true);

  const deps: SessionDeps = {
    llm: tracing?.llm ?? params.llm,
    events,
    history: params.history,
    toolSets,
    limit: pLimit(Math.max(1, options.maxConcurrentToolCalls ?? DEFAULT_MAX_CONCURRENT_TOOL_CALLS)),
    toolContext: () => ({ agent: name, session, depth, ...(params.post ? { post: params.post } : {}) }),
    recordMessage: journal
      ? (message) => {
          journal.record(message);
          onMessageRecorded(message);
        }
      : onMessageRecorded,
    needsApproval: (call) =>
      approvalList.has(call.name) || toolSets.some((set) => set.needsApproval?.(call) === true),
    announceApprovals: (iteration, requests) => approvals().announce(iteration, requests),
    redactor,
    now: Date.now,
    ...(journal
      ? {
          noteToolStart: (call: ToolCall) => journal.toolStarting(call.id, isIdempotent(call)),
        }
      : {}),
  };
  /**
   * Creates a root actor of this session: its actors find `deps` through the actor system. With a
   * persisted snapshot it resumes where that one stood (a chat parked awaiting approval).
   */
  const createSessionActor = <M extends AnyStateMachine>(
    machine: M,
    input: InputFrom<M>,
    snapshot?: Record<string, unknown>,
  ): Actor<M> => {
    const reporter = isReportingStates ? stateReporter() : undefined;
    const inspect =
      reporter && params.inspect
        ? (inspection: InspectionEvent) => {
            reporter(inspection);
            params.inspect?.(inspection);
          }
        : (reporter ?? params.inspect);
    const actor = createActor(machine, {
      input,
      ...(snapshot ? { snapshot } : {}),
      ...(inspect ? { inspect } : {}),
    } as ActorOptions<M>);
    bindSessionDeps(actor.system, deps);
    return actor;
  };

  const manager = await ContextManager.create({
    ...(params.history ? { history: params.history } : {}),
    tokenLimit: options.tokenLimit ?? DEFAULT_TOKEN_LIMIT,
    compactor: async (fork, topic, signal) => {
      const actor = createSessionActor(boundMachines.compaction, {
        messages: fork.messages,
        systemPrompt,
        // The tools stay defined (with tool_choice none) when the history holds tool calls.
        options: withTools(baseOptions),
        ...(topic ? { topic } : {}),
      });
      const abort = () => actor.stop();
      signal?.addEventListener("abort", abort, { once: true });
      try {
        actor.start();
        const output = await toPromise(actor);
        return output.ok ? { messages: output.messages, tokenUsed: output.tokenUsed } : undefined;
      } catch {
        return undefined;
      } finally {
        signal?.removeEventListener("abort", abort);
      }
    },
  });

  /** StateChanged for every machine in the chat's actor system (chat, iteration, compaction). */
  function stateReporter() {
    const lastValues = new WeakMap<object, string>();
    return (inspection: InspectionEvent) => {
      // Microsteps arrive in the order the machines move (a child's final snapshot event would
      // arrive after its parent already moved on); the init event gives a new child's initial state.
      let snapshot: { value?: unknown };
      if (inspection.type === "@xstate.event" && inspection.event.type === "xstate.init") {
        snapshot = inspection.actorRef.getSnapshot() as { value?: unknown };
      } else if (inspection.type === "@xstate.microstep" || inspection.type === "@xstate.snapshot") {
        snapshot = inspection.snapshot as { value?: unknown };
      } else return;
      if (snapshot.value === undefined) return;
      const machine = (inspection.actorRef as { logic?: { id?: string } }).logic?.id ?? "unknown";
      const value = snapshot.value;
      const key = typeof value === "string" ? value : JSON.stringify(value);
      if (lastValues.get(inspection.actorRef) === key) return;
      lastValues.set(inspection.actorRef, key);
      const context = (snapshot as { context?: { iteration?: number } }).context;
      events.emit(machine === "chat" ? 0 : (context?.iteration ?? 0), {
        kind: "StateChanged",
        machine,
        state: snapshot.value,
      });
    };
  }

  // One chat at a time per session: later calls wait their turn.
  let queue: Promise<unknown> = Promise.resolve();
  const serialise = <T>(task: () => Promise<T>): Promise<T> => {
    const run = queue.then(task, task);
    queue = run.catch(() => undefined);
    return run;
  };

  function reportCancelledChat(text: string, reason: string): void {
    const chatId = createId();
    events.emit(0, { kind: "ChatStarted", text }, chatId);
    const error = { name: "ChatCancelledError", message: reason };
    events.emit(0, { kind: "ChatFailed", error, cancelled: true }, chatId);
  }

  /** Adds a chat's own listener for as long as it runs (chats are serialised: no other chat's events). */
  async function observeChat<T>(
    onEvent: ((event: AgentEvent) => void) | undefined,
    run: () => Promise<T>,
  ): Promise<T> {
    if (onEvent === undefined) return run();
    listeners.push(onEvent);
    try {
      return await run();
    } finally {
      listeners.splice(listeners.indexOf(onEvent), 1);
    }
  }

  /** `resumed`: a journaled chat goes on (its ChatResumed is already out). */
  async function runChat(
    userText: string,
    chatOptions: ChatOptions,
    resumed?: ResumedChat,
  ): Promise<ChatResult> {
    const { signal } = chatOptions;
    // Stored and replayed on every later request: half an emoji must not poison the session.
    const text = toWellFormed(userText);
    if (signal?.aborted) {
      reportCancelledChat(text, "the chat was cancelled before it started");
      throw new ChatCancelledError({ prompt: 0, completion: 0, total: 0, cached: 0 });
    }
    events.chatId = resumed?.chatId ?? createId();
    depth = chatOptions.depth ?? 0;
    const context = manager.context;
    if (resumed === undefined) {
      events.emit(0, {
        kind: "ChatStarted",
        text,
        tokenUsed: context.tokenUsed,
        tokenLimit: manager.tokenLimit,
        contextCompactRatio,
      });
    }
    if (resumed?.continueFrom === undefined) journal?.beginChat(events.chatId, text, context.messages.length);
    // `preparing` is left within the start's macrostep, so no inspection event shows it.
    events.emit(0, { kind: "StateChanged", machine: "chat", state: "preparing" });
    const actor = createSessionActor(boundMachines.chat, {
      userText: text,
      injections: toolSets.map((set) => set.iterationPromptInjection()).filter((s) => s.trim() !== ""),
      systemPrompt,
      history: resumed?.continueFrom?.conversation ?? context.messages,
      ...(resumed?.continueFrom ? { resumeFrom: resumed.continueFrom.resumeFrom } : {}),
      options: baseOptions,
      tools: toolSets.flatMap((set) => set.tools()),
      maxIterations,
      tokenLimit: manager.tokenLimit,
      contextCompactRatio,
      tokenUsed: context.tokenUsed,
    });
    const cancel = () => {
      if (actor.getSnapshot().status === "active") actor.send({ type: "cancel" });
    };
    signal?.addEventListener("abort", cancel, { once: true });
    let output: ChatOutput | undefined;
    let isParked: boolean;
    approvals().attach(actor);
    try {
      actor.start();
      output = await toPromise(actor);
    } finally {
      signal?.removeEventListener("abort", cancel);
      isParked = await approvals().detach(actor);
      // Ended, or parked with its approval (that record is the one to go on from): nothing to resume.
      journal?.endChat();
    }
    if (isParked || output === undefined) {
      // Stopped on shutdown while a tool call awaited approval: the chat goes on after a restart.
      throw new ChatCancelledError(
        { prompt: 0, completion: 0, total: 0, cached: 0 },
        "the host stopped while a tool call awaited approval; the approval stays pending",
      );
    }
    context.messages = output.messages;
    context.tokenUsed = output.tokenUsed;
    if (output.status !== "done" && params.history) {
      // A chat that did not end well may not have been persisted: the history is the truth.
      context.messages = await params.history.restore().catch(() => context.messages);
    }
    if (output.status === "done")
      return { result: output.result, usage: output.usage, chatId: events.chatId };
    if (output.status === "cancelled") throw new ChatCancelledError(output.usage);
    const error = output.error ?? { name: "Error", message: "the chat failed" };
    // A provider's error may quote the key it was sent; this message reaches replies and logs.
    throw new ChatFailedError(redactor.redactValue(error), output.usage);
  }

  /**
   * A chat parked awaiting approval comes back from its persisted snapshot, first in the queue.
   * Nobody waits for its answer (its requester is gone): it ends in the history and the events.
   */
  function resumeChat(pending: PendingApproval): Promise<void> {
    return new Promise<void>((attached, fail) => {
      void serialise(async () => {
        let actor: Actor<typeof boundMachines.chat>;
        try {
          events.chatId = pending.chatId;
          actor = createSessionActor(boundMachines.chat, undefined as never, pending.snapshot);
          approvals().attach(actor, pending);
          actor.start();
        } catch (error) {
          // A snapshot this code cannot restore: the approval is spent.
          await params.history?.takePendingApproval?.().catch(() => false);
          fail(new Error(`the pending approval cannot be restored: ${describeError(error)}`));
          return;
        }
        attached();
        let output: ChatOutput | undefined;
        try {
          output = await toPromise(actor);
        } finally {
          await approvals().detach(actor);
        }
        const context = manager.context;
        if (output === undefined) return;
        context.messages = output.messages;
        context.tokenUsed = output.tokenUsed;
        if (output.status !== "done" && params.history) {
          context.messages = await params.history.restore().catch(() => context.messages);
        }
      }).catch(() => {});
    });
  }

  /** Issue 11: the chat the session's last host left unfinished goes on, first in the queue. */
  function resumeUnfinishedChat(resumeOptions: { signal?: AbortSignal } = {}): Promise<boolean> {
    return serialise(async () => {
      const progress = journal?.unfinishedChat;
      if (journal === undefined || progress === null || progress === undefined) return false;
      if (parked !== undefined) {
        // Its chat waits for an approval: the approval record goes on from there.
        journal.endChat();
        return false;
      }
      events.chatId = progress.chatId;
      const resumed = await settleUnfinishedChat({
        journal,
        history: manager.context.messages,
        isIdempotent,
        emit: (iteration, body) => events.emit(iteration, body, progress.chatId),
        recordMessage: deps.recordMessage,
        runTool: (call, iteration) => {
          const actor = createActor(resumedToolCall, { input: { call, iteration } });
          bindSessionDeps(actor.system, deps);
          actor.start();
          return toPromise(actor);
        },
      });
      if (resumed === undefined) return false;
      await runChat(resumed.userText, resumeOptions, resumed).catch(() => {});
      return true;
    });
  }

  return {
    name,
    session,
    ...(journal ? { journal, resumeUnfinishedChat } : {}),
    chat: (text, chatOptions = {}) => {
      void approvalsOfSession?.resumeParked().catch(() => {});
      return serialise(() => observeChat(chatOptions.onEvent, () => runChat(text, chatOptions)));
    },
    decideToolCall: (decision) => approvals().decide(decision),
    cancelPendingApproval: () => approvalsOfSession?.cancel() ?? Promise.resolve(),
    parkPendingApproval: () => approvalsOfSession?.park() ?? Promise.resolve(false),
    get hasPendingApproval() {
      return approvalsOfSession?.isPending ?? false;
    },
    compact: (topic, compactOptions = {}) => {
      void approvalsOfSession?.resumeParked().catch(() => {});
      return serialise(() => {
        events.chatId = createId();
        return manager.compact(topic, compactOptions.signal);
      });
    },
    // `/new` cancels a parked approval first: its chat back-fills, then everything is cleared.
    reset: () =>
      (approvalsOfSession?.cancel() ?? Promise.resolve()).then(() =>
        serialise(async () => {
          await manager.clear();
          for (const set of toolSets) set.reset();
        }),
      ),
    get tokenUsed() {
      return manager.context.tokenUsed;
    },
    get contextRatio() {
      return manager.contextRatio;
    },
    get messages(): readonly Message[] {
      return manager.context.messages;
    },
    report: (body) => events.emit(0, body, ""),
    reportCancelledChat,
  };
}
