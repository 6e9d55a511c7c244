import { assign, type CallbackActorLogic, enqueueActions, type PromiseActorLogic, setup } from "xstate";
import type { ApprovalRequest, SessionDeps } from "../src/agent/session-deps.js";
import type { ErrorInfo } from "../src/errors/error-info.js";
import type { GenerateResponse, LlmOptions, Message, TokenUsage, ToolCall } from "../src/llm/types.js";
import { emptyUsage } from "../src/llm/types.js";
import { uniqueToolCallIds } from "../src/llm/unique-tool-call-ids.js";

/**
 * One iteration of the agentic loop: stream one model response, assemble the assistant
 * message, run the tool calls it asked for (each a child actor), back-fill the results in the
 * order the model made the calls.
 *
 * Calls to tools that need approval hold the whole batch in `awaitingApproval` until each one is
 * granted or denied (`approval.granted` / `approval.denied`, sent by the session); a denied call's
 * result is `{"error":"denied","reason":…}` and it never runs.
 *
 * A call whose outcome is `fatal` (an asked agent failed, and the agent's supervision policy says
 * its failure is the chat's) ends the iteration in `failed` at once, with that error.
 *
 * Pure: the model stream (`streamModel`) and the tool runner (`runToolCall`) are named here and
 * bound with `.provide()` at the composition root, and so is `selectApprovals` (which calls need
 * approval is the tools' business); `recordMessages` and `announceApprovals` are the outward
 * actions. Text deltas never travel through this machine (they are published by the stream
 * actor); it sees segment resets and completion.
 */

export interface IterationInput {
  /** The whole request: the system message first, then the conversation. */
  messages: Message[];
  options: LlmOptions;
  /** 1-based. */
  iteration: number;
  /** The last iteration: sent without tools, so the chat ends with an answer. */
  isFinal: boolean;
  /** The session's dependencies, opaque to the machine: handed to the stream and tool actors. */
  deps?: SessionDeps;
}

/** What a tool-call child resolves with. */
export interface ToolCallSettlement {
  callId: string;
  toolName: string;
  ok: boolean;
  /** The tool message the model will see (already truncated). */
  message: Message;
  /** Messages the tool added with `ctx.appendMessage`, placed after all tool results. */
  appended: Message[];
  /**
   * Set when the call's failure ends the chat (an asked agent failed under the `fail` supervision
   * policy): the iteration fails with this error instead of handing the result to the model.
   */
  fatal?: ErrorInfo;
}

/**
 * What a turn that called tools has produced while its calls run: the assistant message and the
 * calls settled so far (by call id). A chat that ends before the turn does (cancelled, or failed by
 * a call) back-fills it, so the history never holds a call without its result.
 */
export interface IterationInFlight {
  assistant: Message;
  settled: Record<string, ToolCallSettlement>;
}

export type IterationOutput =
  | { status: "answered"; usage: TokenUsage; content: string; messages: Message[] }
  | { status: "toolsDone"; usage: TokenUsage; content: null; messages: Message[] }
  | {
      status: "failed";
      usage: TokenUsage;
      error: ErrorInfo;
      /** Set when the turn had called tools (a call's failure ended it): see {@link IterationInFlight}. */
      inFlight?: IterationInFlight;
    };

/** Sent by the stream actor. */
export type StreamEvent =
  | { type: "stream.reset"; reason: string }
  | { type: "stream.completed"; response: GenerateResponse }
  | { type: "stream.failed"; error: ErrorInfo };

/**
 * The session's answer to a call awaiting approval. `arguments`, when given, is the call's
 * arguments text the approver saw: a decision about other arguments is refused.
 */
export type ApprovalEvent =
  | { type: "approval.granted"; toolCallId: string; arguments?: string }
  | { type: "approval.denied"; toolCallId: string; reason?: string; arguments?: string };

export type { ApprovalRequest };

/** The result the model sees for a denied call. */
export function deniedToolResult(call: ToolCall, reason: string | undefined): ToolCallSettlement {
  return {
    callId: call.id,
    toolName: call.name,
    ok: false,
    message: {
      role: "tool",
      toolCallId: call.id,
      toolName: call.name,
      content: JSON.stringify({ error: "denied", ...(reason ? { reason } : {}) }),
    },
    appended: [],
  };
}

/** Whether `event` decides one of the calls still awaiting approval, about the arguments shown. */
export function isAwaitedDecision(context: IterationContext, event: ApprovalEvent): boolean {
  if (!context.awaitingApproval.includes(event.toolCallId)) return false;
  const call = context.toolCalls.find((candidate) => candidate.id === event.toolCallId);
  return call !== undefined && (event.arguments === undefined || event.arguments === call.arguments);
}

export interface IterationContext {
  messages: Message[];
  options: LlmOptions;
  iteration: number;
  isFinal: boolean;
  /** 1-based stream attempt; advanced by each reset. */
  attempt: number;
  response: GenerateResponse | null;
  assistant: Message | null;
  toolCalls: ToolCall[];
  outcomes: Record<string, ToolCallSettlement>;
  /** Ids of the calls still waiting for a decision (set while assembling by `selectApprovals`). */
  awaitingApproval: string[];
  error: ErrorInfo | null;
  /** See {@link IterationInput.deps}. */
  deps: SessionDeps | undefined;
}

type ToolDoneEvent = { type: `xstate.done.actor.${string}`; output: ToolCallSettlement };

function areAllToolCallsSettled(context: IterationContext): boolean {
  return context.toolCalls.every((call) => context.outcomes[call.id] !== undefined);
}

/**
 * What the turn has in flight (see {@link IterationInFlight}), read from a running iteration's
 * context: by whoever cancels the chat (it sends it with the cancel), and for the output of a turn
 * a call's failure ended. Null before the assistant message is assembled, or when it called no tools.
 */
export function iterationInFlight(context: IterationContext): IterationInFlight | null {
  if (context.assistant === null || context.toolCalls.length === 0) return null;
  return { assistant: context.assistant, settled: context.outcomes };
}

/**
 * The turn's messages: the assistant message, the tool messages in the order the model made the
 * calls, then the messages the tools appended. Built in one array (the turn's output, every turn).
 */
export function turnMessages(context: IterationContext): Message[] {
  const { toolCalls, outcomes } = context;
  const messages: Message[] = [context.assistant!];
  for (const call of toolCalls) messages.push(outcomes[call.id]!.message);
  for (const call of toolCalls) for (const message of outcomes[call.id]!.appended) messages.push(message);
  return messages;
}

/**
 * Builds the assistant message from the full response (content, tool calls, reasoning, thinking).
 * A call id the turn repeats is renamed (see `uniqueToolCallIds`) before anything runs: each call
 * then has its own approval, result and events.
 */
export function assembleAssistantMessage(response: GenerateResponse, isFinal = false): Message {
  const message: Message = { role: "assistant", content: response.content };
  // The final turn may not call tools: a server that ignored `tool_choice: "none"` gets its calls
  // dropped, so the turn ends with its text instead of running tools nobody will answer.
  if (response.toolCalls.length > 0 && !isFinal)
    message.toolCalls = uniqueToolCallIds(response.toolCalls).map((call) => ({ ...call }));
  if (response.reasoningContent) message.reasoningContent = response.reasoningContent;
  if (response.thinkingBlocks && response.thinkingBlocks.length > 0) {
    message.thinkingBlocks = response.thinkingBlocks.map((block) => ({ ...block }));
  }
  return message;
}

export const iterationMachine = setup({
  types: {
    context: {} as IterationContext,
    input: {} as IterationInput,
    output: {} as IterationOutput,
    events: {} as StreamEvent | ToolDoneEvent | ApprovalEvent,
  },
  actions: {
    /** The onMessageRecorded audit hook; bound at the composition root. */
    recordMessages: (_, _params: { messages: Message[] }) => {},
    /**
     * Sets `awaitingApproval` to the ids of the calls that need approval (taken only when
     * `needsApproval` says some do). Bound at the composition root with it.
     */
    selectApprovals: assign({ awaitingApproval: () => [] as string[] }),
    /** Publishes the approval requests and persists the pending approval; bound at the composition root. */
    announceApprovals: (_, _params: { requests: ApprovalRequest[] }) => {},
    /** A decision was accepted (ToolApprovalResolved); bound at the composition root. */
    noteDecision: (
      _,
      _params: { toolCallId: string; toolName: string; approved: boolean; reason?: string },
    ) => {},
  },
  actors: {
    /** Streams one response (fromCallback): sends `stream.reset`, then `stream.completed` or `stream.failed`. */
    streamModel: {} as CallbackActorLogic<
      StreamEvent,
      {
        messages: Message[];
        options: LlmOptions;
        iteration: number;
        isFinal: boolean;
        deps?: SessionDeps;
      }
    >,
    /** Runs one tool call under the concurrency cap; never rejects (tool errors are outcomes). */
    runToolCall: {} as PromiseActorLogic<
      ToolCallSettlement,
      { call: ToolCall; iteration: number; deps?: SessionDeps }
    >,
  },
  guards: {
    hasToolCalls: ({ context }) => context.toolCalls.length > 0,
    /** Whether any call of the batch needs approval. Bound at the composition root (the tools decide); by default none does. */
    needsApproval: (_) => false,
    isEveryApprovalDecided: ({ context }) => context.awaitingApproval.length === 0,
    isAwaitedDecision: ({ context, event }) => isAwaitedDecision(context, event as ApprovalEvent),
    allToolCallsSettled: ({ context }) => areAllToolCallsSettled(context),
    isFatalOutcome: ({ event }) => (event as ToolDoneEvent).output.fatal !== undefined,
  },
}).createMachine({
  id: "iteration",
  context: ({ input }) => ({
    messages: input.messages,
    options: input.options,
    iteration: input.iteration,
    isFinal: input.isFinal,
    attempt: 1,
    response: null,
    assistant: null,
    toolCalls: [],
    outcomes: {},
    awaitingApproval: [],
    error: null,
    deps: input.deps,
  }),
  initial: "streaming",
  states: {
    streaming: {
      invoke: {
        src: "streamModel",
        input: ({ context }) => ({
          messages: context.messages,
          options: context.options,
          iteration: context.iteration,
          isFinal: context.isFinal,
          deps: context.deps,
        }),
      },
      on: {
        "stream.reset": {
          actions: assign({ attempt: ({ context }) => context.attempt + 1 }),
        },
        "stream.completed": {
          target: "assembling",
          actions: assign(({ context, event }) => {
            const assistant = assembleAssistantMessage(event.response, context.isFinal);
            return { response: event.response, assistant, toolCalls: assistant.toolCalls ?? [] };
          }),
        },
        "stream.failed": {
          target: "failed",
          actions: assign({ error: ({ event }) => event.error }),
        },
      },
    },
    assembling: {
      // The assistant message was assembled on the way in (one context copy fewer).
      entry: { type: "recordMessages", params: ({ context }) => ({ messages: [context.assistant!] }) },
      always: [
        { guard: "needsApproval", target: "awaitingApproval", actions: "selectApprovals" },
        { guard: "hasToolCalls", target: "executingTools" },
        { target: "answered" },
      ],
    },
    awaitingApproval: {
      // No call of the batch runs before every call awaiting approval is decided: the model asked
      // for them together, and a later call may depend on an earlier one.
      entry: {
        type: "announceApprovals",
        params: ({ context }) => ({
          requests: context.toolCalls
            .filter((call) => context.awaitingApproval.includes(call.id))
            .map((call) => ({ toolCallId: call.id, toolName: call.name, arguments: call.arguments })),
        }),
      },
      on: {
        "approval.granted": {
          guard: "isAwaitedDecision",
          actions: [
            assign({
              awaitingApproval: ({ context, event }) =>
                context.awaitingApproval.filter((id) => id !== event.toolCallId),
            }),
            {
              type: "noteDecision",
              params: ({ context, event }) => ({
                toolCallId: event.toolCallId,
                toolName: context.toolCalls.find((call) => call.id === event.toolCallId)!.name,
                approved: true,
              }),
            },
          ],
        },
        "approval.denied": {
          guard: "isAwaitedDecision",
          actions: [
            assign(({ context, event }) => {
              const call = context.toolCalls.find((candidate) => candidate.id === event.toolCallId)!;
              return {
                awaitingApproval: context.awaitingApproval.filter((id) => id !== event.toolCallId),
                outcomes: { ...context.outcomes, [call.id]: deniedToolResult(call, event.reason) },
              };
            }),
            {
              type: "noteDecision",
              params: ({ context, event }) => ({
                toolCallId: event.toolCallId,
                toolName: context.outcomes[event.toolCallId]!.toolName,
                approved: false,
                ...(event.reason ? { reason: event.reason } : {}),
              }),
            },
            {
              type: "recordMessages",
              params: ({ context, event }) => ({ messages: [context.outcomes[event.toolCallId]!.message] }),
            },
          ],
        },
      },
      always: { guard: "isEveryApprovalDecided", target: "executingTools" },
    },
    executingTools: {
      entry: enqueueActions(({ context, enqueue }) => {
        // Denied calls already have their result.
        for (const call of context.toolCalls.filter((candidate) => !context.outcomes[candidate.id])) {
          enqueue.spawnChild("runToolCall", {
            id: `tool:${call.id}`,
            input: { call, iteration: context.iteration, deps: context.deps },
          });
        }
      }),
      on: {
        "xstate.done.actor.*": [
          {
            // The call's failure ends the chat: the calls still running are stopped with the
            // iteration, and the chat closes them as cancelled.
            guard: "isFatalOutcome",
            target: "failed",
            actions: [
              assign(({ context, event }) => {
                const outcome = (event as ToolDoneEvent).output;
                return {
                  outcomes: { ...context.outcomes, [outcome.callId]: outcome },
                  error: outcome.fatal!,
                };
              }),
              {
                type: "recordMessages",
                params: ({ event }) => ({ messages: [(event as ToolDoneEvent).output.message] }),
              },
            ],
          },
          {
            actions: [
              assign({
                outcomes: ({ context, event }) => {
                  const outcome = (event as ToolDoneEvent).output;
                  return { ...context.outcomes, [outcome.callId]: outcome };
                },
              }),
              {
                type: "recordMessages",
                params: ({ event }) => ({ messages: [(event as ToolDoneEvent).output.message] }),
              },
            ],
          },
        ],
      },
      always: { guard: "allToolCallsSettled", target: "backfilling" },
    },
    backfilling: {
      // The results go back in the order the model made the calls (see `turnMessages`).
      entry: [
        {
          type: "recordMessages",
          params: ({ context }) => ({
            messages: context.toolCalls.flatMap((call) => context.outcomes[call.id]!.appended),
          }),
        },
      ],
      always: "toolsDone",
    },
    answered: { type: "final" },
    toolsDone: { type: "final" },
    failed: { type: "final" },
  },
  output: ({ context }): IterationOutput => {
    const usage = context.response?.usage ?? emptyUsage();
    if (context.error) {
      const inFlight = iterationInFlight(context);
      return { status: "failed", usage, error: context.error, ...(inFlight === null ? {} : { inFlight }) };
    }
    if (context.toolCalls.length === 0) {
      return {
        status: "answered",
        usage,
        content: context.response?.content ?? "",
        messages: [context.assistant!],
      };
    }
    return { status: "toolsDone", usage, content: null, messages: turnMessages(context) };
  },
});
