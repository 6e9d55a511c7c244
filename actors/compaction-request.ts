import { fromPromise } from "xstate";
import type { GenerateResponse, LlmOptions, Message } from "../src/llm/types.js";
import { type SessionDeps, sessionDepsOf } from "./session-deps.js";

/** The summary request of a compaction: one non-streaming request, reported as ModelResponse. */
export function createCompactionRequestActor(resolve: (system: object) => SessionDeps = sessionDepsOf) {
  return fromPromise<GenerateResponse, { messages: Message[]; options: LlmOptions }>(
    async ({ input, signal, system }) => {
      const { llm: client, events } = resolve(system);
      const response = await client.generate({ messages: input.messages, options: input.options, signal });
      events.emit(0, {
        kind: "ModelResponse",
        content: response.content,
        toolCalls: response.toolCalls.length,
        usage: response.usage,
        purpose: "compaction",
      });
      return response;
    },
  );
}
