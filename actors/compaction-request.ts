import { fromPromise } from "xstate";
import type { GenerateResponse, LlmOptions, Message } from "../src/llm/types.js";
import { wellFormedResponse } from "../src/llm/well-formed-message.js";
import { type SessionDeps, sessionDepsOf } from "./session-deps.js";

/** The summary request of a compaction: one non-streaming request, reported as ModelResponse. */
export function createCompactionRequestActor(resolve: (system: object) => SessionDeps = sessionDepsOf) {
  return fromPromise<GenerateResponse, { messages: Message[]; options: LlmOptions }>(
    async ({ input, signal, system }) => {
      const { llm: client, events } = resolve(system);
      // The summary becomes the whole history: well-formed, like every message that enters it.
      const response = wellFormedResponse(
        await client.generate({ messages: input.messages, options: input.options, signal }),
      );
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
