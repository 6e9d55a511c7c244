import type { GenerateResponse, ToolCall } from "../types.js";
import { fromOpenAIChatUsage } from "./from-openai-chat-usage.js";
import { mapOpenAIChatFinishReason } from "./map-openai-chat-finish-reason.js";
import type { OpenAIChatCompletion } from "./openai-chat-wire.js";

/** A non-streaming chat completion → the common response (choice 0). */
export function fromOpenAIChatCompletion(completion: OpenAIChatCompletion): GenerateResponse {
  const [choice] = completion.choices;
  const message = choice?.message;
  const toolCalls = (message?.tool_calls ?? []).map(
    (call, index): ToolCall => ({
      id: call.id || `call_${index}`,
      name: call.function.name,
      arguments: call.function.arguments ?? "",
    }),
  );
  const reasoning = message?.reasoning_content ?? message?.reasoning;
  return {
    content: message?.content ?? message?.refusal ?? "",
    toolCalls,
    ...(reasoning ? { reasoningContent: reasoning } : {}),
    finishReason: mapOpenAIChatFinishReason(choice?.finish_reason ?? "stop", toolCalls.length > 0),
    usage: fromOpenAIChatUsage(completion.usage),
  };
}
