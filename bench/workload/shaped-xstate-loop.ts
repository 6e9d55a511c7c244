import { assign, createActor, enqueueActions, fromCallback, fromPromise, setup, toPromise } from "xstate";
import type { GenerateResponse, LlmOptions, Message, ToolCall } from "../../src/llm/types.js";
import { type BaselineEvents, createBaselineEvents } from "./baseline-events.js";
import { type BaselineChatResult, type BaselineParams, invokeTool } from "./plain-loop.js";

/**
 * The floor of the loop's shape as the design asks for it, with nothing else: a chat machine that
 * invokes one iteration machine per iteration (its own statechart, its own actor), which streams
 * the response in a callback actor and runs each tool call as its own promise actor. No events,
 * no history, no in-flight tracking, no approvals, no journal; with a bus it publishes the events the
 * minimal loop publishes (those a UI needs), the same way. What agentloop costs above this is
 * its own; what this costs above the minimal loop is the price of the shape.
 */

interface IterationContext {
  messages: Message[];
  iteration: number;
  isFinal: boolean;
  events: BaselineEvents | undefined;
  response: GenerateResponse | null;
  outcomes: Record<string, Message>;
}

interface StreamInput {
  messages: Message[];
  iteration: number;
  isFinal: boolean;
  events: BaselineEvents | undefined;
}

type IterationEvent =
  | { type: "stream.completed"; response: GenerateResponse }
  | { type: "stream.failed"; error: unknown }
  | { type: `xstate.done.actor.${string}`; output: Message };

interface ToolCallInput {
  call: ToolCall;
  iteration: number;
  session: string;
  events: BaselineEvents | undefined;
}

type IterationOutput = { messages: Message[]; toolCalls: number };

interface ChatContext {
  session: string;
  messages: Message[];
  iteration: number;
  maxIterations: number;
  events: BaselineEvents | undefined;
}

let nextChat = 0;

export function createShapedXStateLoop(params: BaselineParams) {
  const options: LlmOptions = { model: params.model, tools: [params.tool.definition] };
  const finalOptions: LlmOptions = { model: params.model };

  const iterationMachine = setup({
    types: {
      context: {} as IterationContext,
      input: {} as StreamInput,
      events: {} as IterationEvent,
      output: {} as IterationOutput,
    },
    actors: {
      stream: fromCallback<IterationEvent, StreamInput>(({ input, sendBack }) => {
        const { events, iteration } = input;
        events?.emit("ModelRequest", iteration, {
          final: input.isFinal,
          messageCount: input.messages.length,
        });
        const controller = new AbortController();
        params.backend
          .generateStream(
            {
              messages: input.messages,
              options: input.isFinal ? finalOptions : options,
              signal: controller.signal,
            },
            {
              onTextDelta: (delta) => events?.emit("ModelTextDelta", iteration, { delta }),
              onReasoningDelta: (delta) => events?.emit("ModelReasoningDelta", iteration, { delta }),
            },
          )
          .then(
            (response) => sendBack({ type: "stream.completed", response }),
            (error: unknown) => sendBack({ type: "stream.failed", error }),
          );
        return () => controller.abort();
      }),
      toolCall: fromPromise<Message, ToolCallInput>(({ input, signal }) =>
        invokeTool(
          params.tool,
          input.call,
          { iteration: input.iteration, signal, agent: params.agent, session: input.session },
          input.events,
        ),
      ),
    },
    guards: {
      hasToolCalls: ({ context }) => (context.response?.toolCalls.length ?? 0) > 0 && !context.isFinal,
      allSettled: ({ context }) => context.response!.toolCalls.every((call) => context.outcomes[call.id]),
    },
  }).createMachine({
    id: "shapedIteration",
    context: ({ input }) => ({ ...input, response: null, outcomes: {} }),
    initial: "streaming",
    states: {
      streaming: {
        invoke: {
          src: "stream",
          input: ({ context }) => ({
            messages: context.messages,
            iteration: context.iteration,
            isFinal: context.isFinal,
            events: context.events,
          }),
        },
        on: {
          "stream.completed": {
            target: "assembled",
            actions: assign({ response: ({ event }) => event.response }),
          },
          "stream.failed": "failed",
        },
      },
      assembled: {
        always: [{ guard: "hasToolCalls", target: "executingTools" }, { target: "answered" }],
      },
      executingTools: {
        entry: enqueueActions(({ context, enqueue }) => {
          for (const call of context.response!.toolCalls) {
            enqueue.spawnChild("toolCall", {
              id: `tool:${call.id}`,
              input: { call, iteration: context.iteration, session: "", events: context.events },
            });
          }
        }),
        on: {
          "xstate.done.actor.*": {
            actions: assign({
              outcomes: ({ context, event }) => {
                const message = (event as { output: Message }).output;
                return { ...context.outcomes, [message.toolCallId!]: message };
              },
            }),
          },
        },
        always: { guard: "allSettled", target: "toolsDone" },
      },
      answered: { type: "final" },
      toolsDone: { type: "final" },
      failed: { type: "final" },
    },
    output: ({ context }) => {
      const response = context.response;
      if (response === null) return { messages: [], toolCalls: 0 };
      const assistant: Message = { role: "assistant", content: response.content };
      if (response.toolCalls.length === 0 || context.isFinal) return { messages: [assistant], toolCalls: 0 };
      assistant.toolCalls = response.toolCalls;
      const results = response.toolCalls.map((call) => context.outcomes[call.id]!);
      return { messages: [assistant, ...results], toolCalls: response.toolCalls.length };
    },
  });

  const chatMachine = setup({
    types: {
      context: {} as ChatContext,
      input: {} as ChatContext,
      output: {} as BaselineChatResult,
    },
    actors: { iteration: iterationMachine },
    guards: {
      isBelowCap: ({ context }) => context.iteration < context.maxIterations,
      calledTools: ({ event }) => (event as unknown as { output: IterationOutput }).output.toolCalls > 0,
    },
  }).createMachine({
    id: "shapedChat",
    context: ({ input }) => input,
    initial: "deciding",
    states: {
      deciding: {
        entry: assign({ iteration: ({ context }) => context.iteration + 1 }),
        always: "iterating",
      },
      iterating: {
        invoke: {
          src: "iteration",
          input: ({ context }) => ({
            messages: context.messages,
            iteration: context.iteration,
            isFinal: context.iteration >= context.maxIterations,
            events: context.events,
          }),
          onDone: [
            {
              guard: "calledTools",
              target: "deciding",
              actions: assign({
                messages: ({ context, event }) => [...context.messages, ...event.output.messages],
              }),
            },
            {
              target: "done",
              actions: assign({
                messages: ({ context, event }) => [...context.messages, ...event.output.messages],
              }),
            },
          ],
          onError: "done",
        },
      },
      done: { type: "final" },
    },
    output: ({ context }) => {
      const last = context.messages[context.messages.length - 1];
      return { result: typeof last?.content === "string" ? last.content : "", messages: context.messages };
    },
  });

  return {
    async chat(session: string, text: string): Promise<BaselineChatResult> {
      const events = createBaselineEvents(params.bus, params.agent, session, `shaped-${nextChat++}`);
      events?.emit("ChatStarted", 0, { text });
      const actor = createActor(chatMachine, {
        input: {
          session,
          messages: [
            { role: "system", content: params.systemPrompt },
            { role: "user", content: text },
          ],
          iteration: 0,
          maxIterations: params.maxIterations,
          events,
        },
      });
      actor.start();
      const output = await toPromise(actor);
      events?.emit("ChatCompleted", 0, { result: output.result });
      return output;
    },
  };
}
