import { assign, createActor, fromPromise, setup, toPromise } from "xstate";
import type { GenerateResponse, LlmOptions, Message, ToolCall } from "../../src/llm/types.js";
import { type BaselineEvents, createBaselineEvents } from "./baseline-events.js";
import { type BaselineChatResult, type BaselineParams, invokeTool } from "./plain-loop.js";

interface LoopContext {
  session: string;
  messages: Message[];
  iteration: number;
  maxIterations: number;
  response: GenerateResponse | null;
  events: BaselineEvents | undefined;
}

interface LoopInput {
  session: string;
  messages: Message[];
  maxIterations: number;
  events: BaselineEvents | undefined;
}

interface GenerateInput {
  messages: Message[];
  iteration: number;
  isFinal: boolean;
  events: BaselineEvents | undefined;
}

interface ToolsInput {
  calls: ToolCall[];
  iteration: number;
  session: string;
  events: BaselineEvents | undefined;
}

/**
 * The floor for any statechart-driven loop: one machine, requesting → executingTools → deciding,
 * with two `fromPromise` actors and nothing else (no child machines, no inspection, no history).
 */
const minimalLoopMachine = setup({
  types: {
    context: {} as LoopContext,
    input: {} as LoopInput,
    output: {} as BaselineChatResult,
  },
  actors: {
    generate: fromPromise<GenerateResponse, GenerateInput>(async () => {
      throw new Error("bound with provide()");
    }),
    runTools: fromPromise<Message[], ToolsInput>(async () => {
      throw new Error("bound with provide()");
    }),
  },
  actions: {
    recordResponse: assign(({ context, event }) => {
      const response = (event as unknown as { output: GenerateResponse }).output;
      const assistant: Message = { role: "assistant", content: response.content };
      if (response.toolCalls.length > 0) assistant.toolCalls = response.toolCalls;
      return { response, messages: [...context.messages, assistant] };
    }),
  },
  guards: {
    answeredWithTools: ({ event }) =>
      (event as unknown as { output: GenerateResponse }).output.toolCalls.length > 0,
    isBelowCap: ({ context }) => context.iteration < context.maxIterations,
  },
}).createMachine({
  id: "minimalLoop",
  context: ({ input }) => ({
    session: input.session,
    messages: input.messages,
    iteration: 1,
    maxIterations: input.maxIterations,
    response: null,
    events: input.events,
  }),
  initial: "requesting",
  states: {
    requesting: {
      invoke: {
        src: "generate",
        input: ({ context }) => ({
          messages: context.messages,
          iteration: context.iteration,
          isFinal: context.iteration >= context.maxIterations,
          events: context.events,
        }),
        onDone: [
          { guard: "answeredWithTools", target: "executingTools", actions: "recordResponse" },
          { target: "done", actions: "recordResponse" },
        ],
        onError: "done",
      },
    },
    executingTools: {
      invoke: {
        src: "runTools",
        input: ({ context }) => ({
          calls: context.response?.toolCalls ?? [],
          iteration: context.iteration,
          session: context.session,
          events: context.events,
        }),
        onDone: {
          target: "deciding",
          actions: assign(({ context, event }) => ({ messages: [...context.messages, ...event.output] })),
        },
        onError: "done",
      },
    },
    deciding: {
      always: [
        {
          guard: "isBelowCap",
          target: "requesting",
          actions: assign(({ context }) => ({ iteration: context.iteration + 1 })),
        },
        { target: "done" },
      ],
    },
    done: { type: "final" },
  },
  output: ({ context }) => ({ result: context.response?.content ?? "", messages: context.messages }),
});

let nextChat = 0;

/**
 * The minimal XState loop bound once to the backend and tool; every session shares it (the
 * session's name comes in with the input), so a session costs nothing while idle.
 */
export function createMinimalXStateLoop(params: BaselineParams) {
  const options: LlmOptions = { model: params.model, tools: [params.tool.definition] };
  const finalOptions: LlmOptions = { model: params.model };
  const machine = minimalLoopMachine.provide({
    actors: {
      generate: fromPromise<GenerateResponse, GenerateInput>(({ input, signal }) => {
        const { events, iteration } = input;
        events?.emit("ModelRequest", iteration, {
          final: input.isFinal,
          messageCount: input.messages.length,
        });
        return params.backend.generateStream(
          { messages: input.messages, options: input.isFinal ? finalOptions : options, signal },
          {
            onTextDelta: (delta) => events?.emit("ModelTextDelta", iteration, { delta }),
            onReasoningDelta: (delta) => events?.emit("ModelReasoningDelta", iteration, { delta }),
          },
        );
      }),
      runTools: fromPromise<Message[], ToolsInput>(({ input, signal }) =>
        Promise.all(
          input.calls.map((call) =>
            invokeTool(
              params.tool,
              call,
              { iteration: input.iteration, signal, agent: params.agent, session: input.session },
              input.events,
            ),
          ),
        ),
      ),
    },
  });

  return {
    async chat(session: string, text: string): Promise<BaselineChatResult> {
      const events = createBaselineEvents(params.bus, params.agent, session, `xstate-${nextChat++}`);
      events?.emit("ChatStarted", 0, { text });
      const actor = createActor(machine, {
        input: {
          session,
          messages: [
            { role: "system", content: params.systemPrompt },
            { role: "user", content: text },
          ],
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
