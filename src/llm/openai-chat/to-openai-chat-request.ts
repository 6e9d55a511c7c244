import type { ChatCompletionCreateParams } from "openai/resources/chat/completions";
import type { LlmOptions, Message } from "../types.js";
import { toOpenAIChatMessages } from "./to-openai-chat-messages.js";

/**
 * Builds the Chat Completions request body.
 *
 * - `maxTokens` → `max_completion_tokens`: OpenAI's reasoning models reject the older
 *   `max_tokens`, while compatible servers that only know `max_tokens` ignore the newer name (no
 *   cap, rather than a 400). Pass `extraBody: { max_tokens }` for a server that needs it.
 * - `toolChoice: "none"` keeps the tool definitions and sends `tool_choice: "none"`.
 * - Streaming asks for a final usage chunk (`stream_options.include_usage`).
 * - `extraBody` is merged last, so it can override any field.
 *
 * @see https://platform.openai.com/docs/api-reference/chat/create
 */
export function toOpenAIChatRequest(
  messages: readonly Message[],
  options: LlmOptions,
  isStreaming: boolean,
): ChatCompletionCreateParams {
  const tools = options.tools ?? [];
  return {
    model: options.model,
    messages: toOpenAIChatMessages(messages),
    ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
    ...(options.maxTokens !== undefined ? { max_completion_tokens: options.maxTokens } : {}),
    ...(options.reasoningEffort ? { reasoning_effort: options.reasoningEffort } : {}),
    ...(tools.length > 0
      ? {
          tools: tools.map((tool) => ({
            type: "function" as const,
            function: { name: tool.name, description: tool.description, parameters: tool.parameters },
          })),
          ...(options.toolChoice === "none" ? { tool_choice: "none" as const } : {}),
        }
      : {}),
    ...(isStreaming ? { stream: true, stream_options: { include_usage: true } } : { stream: false }),
    ...options.extraBody,
  };
}
