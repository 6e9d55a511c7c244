/**
 * The parts of the Chat Completions wire format this backend reads, as zod schemas. Lenient on
 * purpose: OpenAI-compatible servers (vLLM, llama.cpp, Ollama, DeepSeek) omit or null fields
 * OpenAI always sends, so everything not needed to build the response is optional.
 *
 * @see https://platform.openai.com/docs/api-reference/chat-streaming/streaming
 */
import { z } from "zod";

export const OpenAIChatUsage = z.object({
  prompt_tokens: z.number().nullish(),
  completion_tokens: z.number().nullish(),
  prompt_tokens_details: z.object({ cached_tokens: z.number().nullish() }).nullish(),
  /** DeepSeek reports cache hits here as well as (newer) in prompt_tokens_details. */
  prompt_cache_hit_tokens: z.number().nullish(),
});
export type OpenAIChatUsage = z.infer<typeof OpenAIChatUsage>;

export const OpenAIChatToolCallDelta = z.object({
  /** Fragments of one call share an index; a few compatible servers leave it out. */
  index: z.number().int().nullish(),
  id: z.string().nullish(),
  function: z.object({ name: z.string().nullish(), arguments: z.string().nullish() }).nullish(),
});
export type OpenAIChatToolCallDelta = z.infer<typeof OpenAIChatToolCallDelta>;

export const OpenAIChatChunk = z.object({
  choices: z
    .array(
      z.object({
        index: z.number().nullish(),
        delta: z
          .object({
            content: z.string().nullish(),
            /** DeepSeek-style reasoning text. */
            reasoning_content: z.string().nullish(),
            /** The same under the name vLLM and OpenRouter use. */
            reasoning: z.string().nullish(),
            refusal: z.string().nullish(),
            tool_calls: z.array(OpenAIChatToolCallDelta).nullish(),
          })
          .nullish(),
        finish_reason: z.string().nullish(),
      }),
    )
    .nullish(),
  usage: OpenAIChatUsage.nullish(),
});
export type OpenAIChatChunk = z.infer<typeof OpenAIChatChunk>;

export const OpenAIChatCompletion = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullish(),
          reasoning_content: z.string().nullish(),
          reasoning: z.string().nullish(),
          refusal: z.string().nullish(),
          tool_calls: z
            .array(
              z.object({
                id: z.string().nullish(),
                function: z.object({ name: z.string(), arguments: z.string().nullish() }),
              }),
            )
            .nullish(),
        }),
        finish_reason: z.string().nullish(),
      }),
    )
    .min(1),
  usage: OpenAIChatUsage.nullish(),
});
export type OpenAIChatCompletion = z.infer<typeof OpenAIChatCompletion>;
