import { fromPromise } from "xstate";
import { requireDeps, type SessionDeps } from "../src/agent/session-deps.js";
import type { GenerateResponse, LlmOptions, Message } from "../src/llm/types.js";
import { wellFormedResponse } from "../src/llm/well-formed-message.js";

export interface CompactionRequestInput {
  messages: Message[];
  options: LlmOptions;
  /** The session's model client and event emitter (passed down from the machine's context). */
  deps?: SessionDeps;
}

/** The summary request of a compaction: one non-streaming request, reported as ModelResponse. */
export const compactionRequestActor = fromPromise<GenerateResponse, CompactionRequestInput>(
  async ({ input, signal }) => {
    const { llm: client, events } = requireDeps(input.deps, "compaction");
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
