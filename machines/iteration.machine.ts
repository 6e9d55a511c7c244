import { assign, type CallbackActorLogic, enqueueActions, type PromiseActorLogic, setup } from "xstate";
import type { ErrorInfo } from "../src/events/types.js";
import type { GenerateResponse, LlmOptions, Message, TokenUsage, ToolCall } from "../src/llm/types.js";
import { emptyUsage } from "../src/llm/types.js";

/**
 * One iteration of the agentic loop (SPEC §3): stream one model response, assemble the assistant
 * message, run the tool calls it asked for (each a child actor), back-fill the results in the
 * order the model made the calls.
 *
 * Pure: the model stream (`streamModel`) and the tool runner (`runToolCall`) are named here and
 * bound with `.provide()` at the composition root; `recordMessages` is the only outward action. Text deltas never travel through this machine (they are published by the stream
 * actor); it sees segment resets and completion.
 */

export interface IterationInput {
  /** The whole request: the system message first, then the conversation. */
  messages: Message[];
  options: LlmOptions;
  /** 1-based. */
  iteration: number;
  /** The last iteration: sent without tools (SPEC §2.2). */
  isFinal: boolean;
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
}

export type IterationOutput =
  | { status: "answered"; usage: TokenUsage; content: string; messages: Message[] }
  | { status: "toolsDone"; usage: TokenUsage; content: null; messages: Message[] }
  | { status: "failed"; usage: TokenUsage; error: ErrorInfo };

/** Sent by the stream actor. */
export type StreamEvent =
  | { type: "stream.reset"; reason: string }
  | { type: "stream.completed"; response: GenerateResponse }
  | { type: "stream.failed"; error: ErrorInfo };

/** Sent to the parent (the chat machine) so a cancelled chat can back-fill what was in flight. */
export type IterationProgressEvent =
  | { type: "iteration.assembled"; message: Message }
  | { type: "iteration.toolSettled"; outcome: ToolCallSettlement };

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
  /** Tool messages in call order, then appended messages (set while back-filling). */
  results: Message[];
  error: ErrorInfo | null;
}

type ToolDoneEvent = { type: `xstate.done.actor.${string}`; output: ToolCallSettlement };

/** Builds the assistant message from the full response (content, tool calls, reasoning, thinking). */
export function assembleAssistantMessage(response: GenerateResponse, isFinal = false): Message {
  const message: Message = { role: "assistant", content: response.content };
  // The final turn may not call tools: a server that ignored `tool_choice: "none"` gets its calls
  // dropped, so the turn ends with its text instead of running tools nobody will answer.
  if (response.toolCalls.length > 0 && !isFinal)
    message.toolCalls = response.toolCalls.map((call) => ({ ...call }));
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
    events: {} as StreamEvent | ToolDoneEvent,
  },
  actions: {
    /** The onMessageRecorded audit hook; bound at the composition root. */
    recordMessages: (_, _params: { messages: Message[] }) => {},
  },
  actors: {
    /** Streams one response (fromCallback): sends `stream.reset`, then `stream.completed` or `stream.failed`. */
    streamModel: {} as CallbackActorLogic<
      StreamEvent,
      { messages: Message[]; options: LlmOptions; iteration: number; isFinal: boolean }
    >,
    /** Runs one tool call under the concurrency cap; never rejects (tool errors are outcomes). */
    runToolCall: {} as PromiseActorLogic<ToolCallSettlement, { call: ToolCall; iteration: number }>,
  },
  guards: {
    hasToolCalls: ({ context }) => context.toolCalls.length > 0,
    allToolCallsSettled: ({ context }) =>
      context.toolCalls.every((call) => context.outcomes[call.id] !== undefined),
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
    results: [],
    error: null,
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
        }),
      },
      on: {
        "stream.reset": {
          actions: assign({ attempt: ({ context }) => context.attempt + 1 }),
        },
        "stream.completed": {
          target: "assembling",
          actions: assign({ response: ({ event }) => event.response }),
        },
        "stream.failed": {
          target: "failed",
          actions: assign({ error: ({ event }) => event.error }),
        },
      },
    },
    assembling: {
      entry: [
        assign(({ context }) => {
          const assistant = assembleAssistantMessage(context.response!, context.isFinal);
          return { assistant, toolCalls: assistant.toolCalls ?? [] };
        }),
        { type: "recordMessages", params: ({ context }) => ({ messages: [context.assistant!] }) },
        enqueueActions(({ context, enqueue, self }) => {
          // The parent (the chat machine) tracks what is in flight; standalone runs have none.
          if (self._parent) enqueue.sendParent({ type: "iteration.assembled", message: context.assistant! });
        }),
      ],
      always: [{ guard: "hasToolCalls", target: "executingTools" }, { target: "answered" }],
    },
    executingTools: {
      entry: enqueueActions(({ context, enqueue }) => {
        for (const call of context.toolCalls) {
          enqueue.spawnChild("runToolCall", {
            id: `tool:${call.id}`,
            input: { call, iteration: context.iteration },
          });
        }
      }),
      on: {
        "xstate.done.actor.*": {
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
            enqueueActions(({ event, enqueue, self }) => {
              if (self._parent) {
                enqueue.sendParent({
                  type: "iteration.toolSettled",
                  outcome: (event as ToolDoneEvent).output,
                });
              }
            }),
          ],
        },
      },
      always: { guard: "allToolCallsSettled", target: "backfilling" },
    },
    backfilling: {
      entry: [
        assign({
          results: ({ context }) => {
            const ordered = context.toolCalls.map((call) => context.outcomes[call.id]!);
            return [
              ...ordered.map((outcome) => outcome.message),
              ...ordered.flatMap((outcome) => outcome.appended),
            ];
          },
        }),
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
    if (context.error) return { status: "failed", usage, error: context.error };
    if (context.toolCalls.length === 0) {
      return {
        status: "answered",
        usage,
        content: context.response?.content ?? "",
        messages: [context.assistant!],
      };
    }
    return { status: "toolsDone", usage, content: null, messages: [context.assistant!, ...context.results] };
  },
});
