import { fromPromise } from "xstate";
import type { LlmClient } from "../src/llm/llm-client.js";
import type { GenerateResponse, LlmOptions, Message } from "../src/llm/types.js";
import type { EventEmitter } from "./event-publisher.js";

/** The summary request of a compaction: one non-streaming request, reported as ModelResponse. */
export function createCompactionRequestActor(client: LlmClient, events: EventEmitter) {
  return fromPromise<GenerateResponse, { messages: Message[]; options: LlmOptions }>(
    async ({ input, signal }) => {
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
