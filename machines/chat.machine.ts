import { assign, type PromiseActorLogic, setup } from "xstate";
import { ChatCancelledError } from "../src/agent/chat-errors.js";
import type { SessionDeps } from "../src/agent/session-deps.js";
import { BudgetExceededError } from "../src/errors/budget-exceeded-error.js";
import { type ErrorInfo, errorInfo, toErrorInfo } from "../src/errors/error-info.js";
import type { EventBody } from "../src/events/types.js";
import type { LlmOptions, Message, TokenUsage, ToolDefinition } from "../src/llm/types.js";
import { addUsage, emptyUsage, withoutTools } from "../src/llm/types.js";
import { type CompactionOutput, compactionMachine } from "./compaction.machine.js";
import {
  type IterationInFlight,
  type IterationOutput,
  iterationMachine,
  type ToolCallSettlement,
} from "./iteration.machine.js";

/**
 * The chat loop: prepare the user message and persist it (so a host that dies mid-chat
 * loses nothing the user sent), iterate (generate → tools → back-fill) up to maxIterations with the
 * last turn forced to text, measure the context, then either compact or append the rest of this
 * chat's messages to the history.
 *
 * Pure: `runIteration` (the iteration machine), `compactContext` (the compaction machine) and
 * `appendHistory` are bound with `.provide()` at the composition root; `report` and
 * `recordMessages` are the outward actions.
 */

/** Shown instead of an empty reply (no text and no tool calls). */
export const EMPTY_REPLY_PLACEHOLDER = "(the model returned no content)";

export interface ChatInput {
  userText: string;
  /** Non-empty `iterationPromptInjection()`s of the ToolSets, prepended to the user's text. */
  injections: string[];
  systemPrompt: string;
  /** The conversation so far (no system message). */
  history: Message[];
  /** Model, maxTokens, reasoningEffort … (tools are added while preparing). */
  options: LlmOptions;
  tools: ToolDefinition[];
  maxIterations: number;
  tokenLimit: number;
  contextCompactRatio: number;
  /** tokenUsed before this chat. */
  tokenUsed: number;
  /**
   * The session's dependencies, opaque to the machine: kept in the context and handed to every
   * actor it invokes (the bound actors use them; scripted ones in tests need none).
   */
  deps?: SessionDeps;
  /**
   * A chat resumed from its journal after its host stopped: `history` already ends with what the
   * chat had produced (no user message is added), of which the stored history holds `persisted`
   * messages; the chat began at `chatStart` and goes on after `iteration`.
   */
  resumeFrom?: { chatStart: number; persisted: number; iteration: number };
  /**
   * Whether the chat may spend tokens (a tenant's budget), checked by whoever starts the chat: an
   * exceeded one ends the chat `budget_exceeded` before the user message is stored or the model asked.
   */
  budget?: BudgetCheck;
}

/** See {@link ChatInput.budget}. */
export type BudgetCheck = { isExceeded: false } | { isExceeded: true; reason: string };

export type ChatStatus = "done" | "failed" | "cancelled";

export interface ChatOutput {
  status: ChatStatus;
  result: string;
  /** Sum over the chat's requests (billing). */
  usage: TokenUsage;
  /** The last request's prompt + completion tokens (or the summary's after a compaction). */
  tokenUsed: number;
  /** The whole conversation after this chat, as it was persisted. */
  messages: Message[];
  compacted: boolean;
  error: ErrorInfo | null;
}

/** What a chat is asked to do: set from the input; only `options` changes (its tools, while preparing). */
export interface ChatConfig {
  userText: string;
  injections: string[];
  systemPrompt: string;
  options: LlmOptions;
  tools: ToolDefinition[];
  maxIterations: number;
  tokenLimit: number;
  contextCompactRatio: number;
  budget?: BudgetCheck;
}

export interface ChatContext {
  /**
   * The chat's settings, kept in one field: XState copies the whole context at every `assign`,
   * and V8 turns an object copied that way with more than about 19 fields into a slow dictionary
   * (a copy then costs ~20× more), so the context stays under that size.
   */
  config: ChatConfig;
  messages: Message[];
  /** Index of this chat's first message in `messages`. */
  chatStart: number;
  /**
   * How many of `messages` the history holds (always a prefix): the writes after the loop append
   * only what lies past it, so nothing is written twice. A journal of the chat's progress.
   */
  persisted: number;
  /** A cancel arrived while the user message was being written: honoured once the write settles. */
  isCancelRequested: boolean;
  /** 1-based; 0 before the first iteration. */
  iteration: number;
  usage: TokenUsage;
  lastUsage: TokenUsage | null;
  tokenUsed: number;
  result: string | null;
  /**
   * What the iteration that ended the chat early had produced (back-filled by `cancelling` and
   * `failing`): taken from the cancel event or the failed iteration's output. The running iteration
   * keeps it in its own context until then, so a turn costs the chat no progress events.
   */
  inFlight: { assistant: Message | null; settled: Record<string, ToolCallSettlement> };
  compacted: boolean;
  error: ErrorInfo | null;
  /** Set by the final state reached. */
  status: ChatStatus | null;
  /** The history was compacted once after the provider said the context is too long. */
  hasRecoveredContext: boolean;
  /** See {@link ChatInput.deps}; left out of a JSON snapshot and handed back on restore. */
  deps: SessionDeps | undefined;
  /** Resumed from the journal: the conversation already holds the user message. */
  isResumed?: boolean;
}

const CONFIG_FIELDS = [
  "userText",
  "injections",
  "systemPrompt",
  "options",
  "tools",
  "maxIterations",
  "tokenLimit",
  "contextCompactRatio",
  "budget",
] as const satisfies ReadonlyArray<keyof ChatConfig>;

/**
 * A persisted chat snapshot as this version reads it. Snapshots stored before the settings moved
 * into `config` (a chat parked awaiting approval across an upgrade) kept them at the top of the
 * context: they are moved, so the parked chat resumes.
 */
export function upgradeChatSnapshot(snapshot: Record<string, unknown>): Record<string, unknown> {
  const context = snapshot.context as Record<string, unknown> | undefined;
  if (typeof context !== "object" || context === null || "config" in context || !("userText" in context)) {
    return snapshot;
  }
  const config: Record<string, unknown> = {};
  const rest: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(context)) {
    if ((CONFIG_FIELDS as ReadonlyArray<string>).includes(key)) config[key] = value;
    else rest[key] = value;
  }
  return { ...snapshot, context: { config, ...rest } };
}

/**
 * `inFlight`: what the running iteration has produced (`iterationInFlight` of its context), sent by
 * whoever cancels the chat while it iterates, so the chat back-fills the calls left open.
 */
export type ChatEvent = { type: "cancel"; inFlight?: IterationInFlight | null };

/** The user message: the injections, then the user's text. */
export function buildUserMessage(userText: string, injections: string[]): Message {
  const parts = injections.filter((text) => text.trim() !== "");
  return { role: "user", content: parts.length === 0 ? userText : `${parts.join("\n\n")}\n\n${userText}` };
}

/** What a chat has in flight between iterations: nothing (one shared value, never changed). */
const NOTHING_IN_FLIGHT: ChatContext["inFlight"] = Object.freeze({
  assistant: null,
  settled: Object.freeze({}),
});

/** The messages an iteration produced, an empty assistant turn left out (a copy only when there is one). */
function turnOf(output: Extract<IterationOutput, { messages: Message[] }>): Message[] {
  return output.messages.some(isEmptyAssistant)
    ? output.messages.filter((message) => !isEmptyAssistant(message))
    : output.messages;
}

/** An assistant message with nothing in it is left out (providers reject empty turns). */
function isEmptyAssistant(message: Message): boolean {
  return (
    message.role === "assistant" &&
    (typeof message.content === "string" ? message.content.trim() === "" : message.content.length === 0) &&
    !message.toolCalls?.length &&
    !message.thinkingBlocks?.length
  );
}

/** Result messages for the calls of the in-flight assistant message that never settled. */
export function unsettledResults(inFlight: ChatContext["inFlight"]): Message[] {
  const { assistant, settled } = inFlight;
  if (!assistant) return [];
  return (assistant.toolCalls ?? [])
    .filter((call) => settled[call.id] === undefined)
    .map((call) => ({
      role: "tool",
      toolCallId: call.id,
      toolName: call.name,
      content: JSON.stringify({ error: "cancelled" }),
    }));
}

/**
 * Closes what a cancelled or failed iteration left open: every unfinished tool call gets a
 * `cancelled` result, so the history never holds a call without its result (providers refuse a history with one).
 */
export function backfillInFlight(context: ChatContext): Message[] {
  const { assistant, settled } = context.inFlight;
  if (!assistant || isEmptyAssistant(assistant)) return context.messages;
  const cancelled = new Map(
    unsettledResults(context.inFlight).map((message) => [message.toolCallId, message]),
  );
  const calls = assistant.toolCalls ?? [];
  const results = calls.map((call) => settled[call.id]?.message ?? cancelled.get(call.id)!);
  const appended = calls.flatMap((call) => settled[call.id]?.appended ?? []);
  return [...context.messages, assistant, ...results, ...appended];
}

function requestMessages(context: ChatContext): Message[] {
  return [{ role: "system", content: context.config.systemPrompt }, ...context.messages];
}

/** The params of the actions and guards that read an iteration's output (its done event's). */
const iterationOutput = ({ event }: { event: { output: IterationOutput } }) => ({ output: event.output });
/** The params of the actions that read an invoked actor's error. */
const actorError = ({ event }: { event: { error: unknown } }) => ({ error: event.error });
/** The params of the guard that reads a compaction's output. */
const compactionOutput = ({ event }: { event: { output: CompactionOutput } }) => ({ output: event.output });

export const chatMachine = setup({
  types: {
    context: {} as ChatContext,
    input: {} as ChatInput,
    output: {} as ChatOutput,
    events: {} as ChatEvent,
  },
  actions: {
    /** Publishes a lifecycle event; bound at the composition root. */
    report: (_, _params: { iteration: number; body: EventBody }) => {},
    /** The onMessageRecorded audit hook; bound at the composition root. */
    recordMessages: (_, _params: { messages: Message[] }) => {},
    /** Adds the iteration's messages (an empty assistant turn left out) and usage; keeps the answer. */
    recordIteration: assign(({ context }, { output }: { output: IterationOutput }) => {
      const content = output.status === "failed" ? null : output.content;
      return {
        messages: output.status === "failed" ? context.messages : [...context.messages, ...turnOf(output)],
        usage: addUsage(context.usage, output.usage),
        lastUsage: output.usage,
        inFlight: NOTHING_IN_FLIGHT,
        result: content === null ? context.result : content.trim() === "" ? EMPTY_REPLY_PLACEHOLDER : content,
      };
    }),
    recordFailure: assign(({ context }, { output }: { output: IterationOutput }) => ({
      error: output.status === "failed" ? output.error : null,
      usage: addUsage(context.usage, output.usage),
      // A call's failure ended a turn that called tools: what it had produced is back-filled.
      inFlight:
        output.status === "failed" && output.inFlight !== undefined
          ? { assistant: output.inFlight.assistant, settled: output.inFlight.settled }
          : context.inFlight,
    })),
    recordError: assign((_, { error }: { error: unknown }) => ({ error: toErrorInfo(error) })),
    /** The chat is refused for its spent budget. */
    refuseOverBudget: assign({
      error: ({ context }) => {
        const budget = context.config.budget;
        const reason = budget?.isExceeded === true ? budget.reason : "the token budget is spent";
        return toErrorInfo(new BudgetExceededError(reason));
      },
    }),
    /** The history now holds every message of the context (the write that just finished). */
    markPersisted: assign({ persisted: ({ context }) => context.messages.length }),
  },
  actors: {
    /** One iteration (the iteration machine, with its actors bound at the composition root). */
    runIteration: iterationMachine,
    /** The compaction machine. */
    compactContext: compactionMachine,
    appendHistory: {} as PromiseActorLogic<void, { messages: Message[]; deps?: SessionDeps }>,
  },
  guards: {
    isFinalIteration: ({ context }) => context.iteration >= context.config.maxIterations,
    hasIterationFailed: (_, { output }: { output: IterationOutput }) => output.status === "failed",
    /** The provider refused the context as too long, and there is history before this chat to compact (once). */
    isContextOverflow: ({ context }, { output }: { output: IterationOutput }) => {
      return (
        output.status === "failed" &&
        output.error.code === "context_length_exceeded" &&
        !context.hasRecoveredContext &&
        context.chatStart > 0
      );
    },
    hasAnswered: (_, { output }: { output: IterationOutput }) => output.status === "answered",
    isOverCompactRatio: ({ context }) =>
      context.config.tokenLimit > 0 &&
      context.tokenUsed / context.config.tokenLimit >= context.config.contextCompactRatio,
    hasCompacted: (_, { output }: { output: CompactionOutput }) => output.ok,
    isCancelRequested: ({ context }) => context.isCancelRequested,
    /** The budget given with the input is spent: no model request may be made. */
    isOverBudget: ({ context }) => context.config.budget?.isExceeded === true && context.isResumed !== true,
  },
}).createMachine({
  id: "chat",
  context: ({ input }) => ({
    config: {
      userText: input.userText,
      injections: input.injections,
      systemPrompt: input.systemPrompt,
      options: input.options,
      tools: input.tools,
      maxIterations: Math.max(1, input.maxIterations),
      tokenLimit: input.tokenLimit,
      contextCompactRatio: input.contextCompactRatio,
      ...(input.budget === undefined ? {} : { budget: input.budget }),
    },
    messages: input.history,
    chatStart: input.resumeFrom?.chatStart ?? input.history.length,
    persisted: input.resumeFrom?.persisted ?? input.history.length,
    isCancelRequested: false,
    iteration: input.resumeFrom?.iteration ?? 0,
    usage: emptyUsage(),
    lastUsage: null,
    tokenUsed: input.tokenUsed,
    result: null,
    inFlight: NOTHING_IN_FLIGHT,
    compacted: false,
    error: null,
    status: null,
    hasRecoveredContext: false,
    deps: input.deps,
    isResumed: input.resumeFrom !== undefined,
  }),
  initial: "admitting",
  states: {
    admitting: {
      // A spent budget refuses the chat before anything is stored or asked of the model.
      always: [
        { guard: "isOverBudget", target: "failed", actions: "refuseOverBudget" },
        { target: "preparing" },
      ],
    },
    preparing: {
      entry: [
        assign(({ context }) => ({
          messages: context.isResumed
            ? context.messages
            : [...context.messages, buildUserMessage(context.config.userText, context.config.injections)],
          config:
            context.config.tools.length > 0
              ? { ...context.config, options: { ...context.config.options, tools: context.config.tools } }
              : context.config,
        })),
        {
          type: "recordMessages",
          params: ({ context }) => ({
            messages: context.isResumed ? [] : [context.messages[context.messages.length - 1]!],
          }),
        },
      ],
      always: "persistingUserMessage",
    },
    persistingUserMessage: {
      // The user message is durable before the first model request: a host killed mid-chat loses
      // nothing the user sent (a trailing user message is a valid history to continue from).
      // A resumed chat stores here what it had produced before its host stopped.
      // A cancel waits for the write to settle, so the messages written later are never doubled.
      on: { cancel: { actions: assign({ isCancelRequested: true }) } },
      invoke: {
        src: "appendHistory",
        input: ({ context }) => ({ messages: context.messages.slice(context.persisted), deps: context.deps }),
        onDone: [
          { guard: "isCancelRequested", target: "cancelling", actions: "markPersisted" },
          { target: "iterating", actions: "markPersisted" },
        ],
        onError: { target: "failed", actions: { type: "recordError", params: actorError } },
      },
    },
    iterating: {
      initial: "deciding",
      on: {
        cancel: {
          target: "cancelling",
          actions: assign({
            inFlight: ({ context, event }) =>
              event.inFlight
                ? { assistant: event.inFlight.assistant, settled: event.inFlight.settled }
                : context.inFlight,
          }),
        },
      },
      states: {
        deciding: {
          entry: assign({ iteration: ({ context }) => context.iteration + 1 }),
          always: [{ guard: "isFinalIteration", target: "finalTurn" }, { target: "toolTurn" }],
        },
        toolTurn: {
          invoke: {
            src: "runIteration",
            input: ({ context }) => ({
              messages: requestMessages(context),
              options: context.config.options,
              iteration: context.iteration,
              isFinal: false,
              deps: context.deps,
            }),
            onDone: [
              {
                guard: { type: "isContextOverflow", params: iterationOutput },
                target: "#chat.recoveringContext",
                actions: { type: "recordFailure", params: iterationOutput },
              },
              {
                guard: { type: "hasIterationFailed", params: iterationOutput },
                target: "#chat.failing",
                actions: { type: "recordFailure", params: iterationOutput },
              },
              {
                guard: { type: "hasAnswered", params: iterationOutput },
                target: "#chat.measuring",
                actions: { type: "recordIteration", params: iterationOutput },
              },
              { target: "deciding", actions: { type: "recordIteration", params: iterationOutput } },
            ],
            onError: { target: "#chat.failing", actions: { type: "recordError", params: actorError } },
          },
        },
        finalTurn: {
          invoke: {
            src: "runIteration",
            input: ({ context }) => ({
              messages: requestMessages(context),
              options: withoutTools(context.config.options, context.messages),
              iteration: context.iteration,
              isFinal: true,
              deps: context.deps,
            }),
            onDone: [
              {
                guard: { type: "isContextOverflow", params: iterationOutput },
                target: "#chat.recoveringContext",
                actions: { type: "recordFailure", params: iterationOutput },
              },
              {
                guard: { type: "hasIterationFailed", params: iterationOutput },
                target: "#chat.failing",
                actions: { type: "recordFailure", params: iterationOutput },
              },
              { target: "#chat.measuring", actions: { type: "recordIteration", params: iterationOutput } },
            ],
            onError: { target: "#chat.failing", actions: { type: "recordError", params: actorError } },
          },
        },
      },
    },
    recoveringContext: {
      // A context-length error means "compact, then retry". The history before this chat
      // is compacted (this chat's messages stay exact: the loop may be mid tool chain), then the
      // same iteration runs again. Once per chat; a second overflow fails the chat.
      on: { cancel: "cancelling" },
      invoke: {
        src: "compactContext",
        input: ({ context }) => ({
          messages: context.messages.slice(0, context.chatStart),
          systemPrompt: context.config.systemPrompt,
          options: context.config.options,
          // What this chat has persisted stays in the history, after the summary (one write).
          keptTail: context.messages.slice(context.chatStart, context.persisted),
          deps: context.deps,
        }),
        onDone: [
          {
            guard: { type: "hasCompacted", params: compactionOutput },
            target: "iterating",
            actions: assign(({ context, event }) => {
              const output = event.output as Extract<CompactionOutput, { ok: true }>;
              return {
                messages: [...output.messages, ...context.messages.slice(context.chatStart)],
                chatStart: output.messages.length,
                persisted: output.messages.length + context.persisted - context.chatStart,
                iteration: context.iteration - 1,
                usage: addUsage(context.usage, output.usage),
                hasRecoveredContext: true,
                error: null,
              };
            }),
          },
          {
            target: "failing",
            actions: assign({ usage: ({ context, event }) => addUsage(context.usage, event.output.usage) }),
          },
        ],
        onError: "failing",
      },
    },
    measuring: {
      entry: assign({
        // The last request re-sent the whole context: its size is the context's size. Never a sum.
        tokenUsed: ({ context }) =>
          context.lastUsage ? context.lastUsage.prompt + context.lastUsage.completion : context.tokenUsed,
        result: ({ context }) => context.result ?? EMPTY_REPLY_PLACEHOLDER,
      }),
      always: "decidingCompaction",
    },
    decidingCompaction: {
      always: [{ guard: "isOverCompactRatio", target: "compacting" }, { target: "appending" }],
    },
    compacting: {
      on: { cancel: "cancelling" },
      invoke: {
        src: "compactContext",
        input: ({ context }) => ({
          messages: context.messages,
          systemPrompt: context.config.systemPrompt,
          options: context.config.options,
          deps: context.deps,
        }),
        onDone: [
          {
            guard: { type: "hasCompacted", params: compactionOutput },
            target: "done",
            actions: assign(({ context, event }) => {
              const output = event.output as Extract<CompactionOutput, { ok: true }>;
              return {
                messages: output.messages,
                tokenUsed: output.tokenUsed,
                usage: addUsage(context.usage, output.usage),
                compacted: true,
                // The history was replaced by the summary: it holds all of the context now.
                persisted: output.messages.length,
              };
            }),
          },
          {
            // A failed compaction loses nothing: this chat's messages are appended as usual.
            target: "appending",
            actions: assign({ usage: ({ context, event }) => addUsage(context.usage, event.output.usage) }),
          },
        ],
        onError: "appending",
      },
    },
    appending: {
      invoke: {
        src: "appendHistory",
        input: ({ context }) => ({ messages: context.messages.slice(context.persisted), deps: context.deps }),
        onDone: { target: "done", actions: "markPersisted" },
        onError: { target: "failed", actions: { type: "recordError", params: actorError } },
      },
    },
    failing: {
      entry: [
        {
          type: "recordMessages",
          params: ({ context }) => ({ messages: unsettledResults(context.inFlight) }),
        },
        assign({ messages: ({ context }) => backfillInFlight(context) }),
      ],
      invoke: {
        src: "appendHistory",
        input: ({ context }) => ({ messages: context.messages.slice(context.persisted), deps: context.deps }),
        onDone: { target: "failed", actions: "markPersisted" },
        onError: "failed",
      },
    },
    cancelling: {
      entry: [
        {
          type: "recordMessages",
          params: ({ context }) => ({ messages: unsettledResults(context.inFlight) }),
        },
        assign({
          messages: ({ context }) => backfillInFlight(context),
          error: errorInfo("cancelled", "the chat was cancelled", { name: ChatCancelledError.name }),
        }),
      ],
      invoke: {
        src: "appendHistory",
        input: ({ context }) => ({ messages: context.messages.slice(context.persisted), deps: context.deps }),
        onDone: { target: "cancelled", actions: "markPersisted" },
        onError: "cancelled",
      },
    },
    done: {
      type: "final",
      entry: [
        assign({ status: "done" as const }),
        {
          type: "report",
          params: ({ context }) => ({
            iteration: 0,
            body: {
              kind: "ChatCompleted" as const,
              result: context.result ?? EMPTY_REPLY_PLACEHOLDER,
              usage: context.usage,
              tokenUsed: context.tokenUsed,
              tokenLimit: context.config.tokenLimit,
            },
          }),
        },
      ],
    },
    failed: {
      type: "final",
      entry: [
        assign({ status: "failed" as const }),
        {
          type: "report",
          params: ({ context }) => ({
            iteration: 0,
            body: {
              kind: "ChatFailed" as const,
              error: context.error ?? errorInfo("internal", "the chat failed", { name: "Error" }),
              cancelled: false,
            },
          }),
        },
      ],
    },
    cancelled: {
      type: "final",
      entry: [
        assign({ status: "cancelled" as const }),
        {
          type: "report",
          params: ({ context }) => ({
            iteration: 0,
            body: { kind: "ChatFailed" as const, error: context.error!, cancelled: true },
          }),
        },
      ],
    },
  },
  output: ({ context }): ChatOutput => {
    return {
      status: context.status ?? "failed",
      result: context.result ?? EMPTY_REPLY_PLACEHOLDER,
      usage: context.usage,
      tokenUsed: context.tokenUsed,
      messages: context.messages,
      compacted: context.compacted,
      error: context.error,
    };
  },
});
