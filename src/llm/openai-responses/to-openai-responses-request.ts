import type { LlmOptions, Message } from "../types.js";
import { type ResponsesInputItem, toOpenAIResponsesInput } from "./to-openai-responses-input.js";

/** The request body as this backend sends it. */
export interface ResponsesRequestBody {
  model: string;
  instructions?: string;
  input: ResponsesInputItem[];
  store: false;
  stream: boolean;
  temperature?: number;
  max_output_tokens?: number;
  reasoning?: { effort: string; summary: "auto" };
  tools?: Array<{ type: "function"; name: string; description: string; parameters: unknown; strict: false }>;
  tool_choice?: "none";
  [extra: string]: unknown;
}

/**
 * Builds the Responses API request body.
 *
 * - `store: false`: stateless, the history is resent on every request (no server-side state to
 *   expire or leak between sessions).
 * - `reasoning: { effort, summary: "auto" }` when reasoningEffort is set: the summaries are what
 *   the stream shows as reasoning.
 * - Tools are non-strict functions (our JSON Schemas are not written for strict mode);
 *   `toolChoice: "none"` keeps them and sends `tool_choice: "none"`.
 * - `extraBody` is merged last, so it can override any field.
 *
 * @see https://platform.openai.com/docs/api-reference/responses/create
 */
export function toOpenAIResponsesRequest(
  messages: readonly Message[],
  options: LlmOptions,
  isStreaming: boolean,
): ResponsesRequestBody {
  const tools = options.tools ?? [];
  return {
    model: options.model,
    ...toOpenAIResponsesInput(messages),
    store: false,
    stream: isStreaming,
    ...(options.temperature !== undefined ? { temperature: options.temperature } : {}),
    ...(options.maxTokens !== undefined ? { max_output_tokens: options.maxTokens } : {}),
    ...(options.reasoningEffort
      ? { reasoning: { effort: options.reasoningEffort, summary: "auto" as const } }
      : {}),
    ...(tools.length > 0
      ? {
          tools: tools.map((tool) => ({
            type: "function" as const,
            name: tool.name,
            description: tool.description,
            parameters: tool.parameters,
            strict: false as const,
          })),
          ...(options.toolChoice === "none" ? { tool_choice: "none" as const } : {}),
        }
      : {}),
    ...options.extraBody,
  };
}
