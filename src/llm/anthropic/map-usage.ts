import { createUsage, type TokenUsage } from "../types.js";
import type { AnthropicUsage } from "./anthropic-wire-schema.js";

/**
 * Anthropic usage → {@link TokenUsage}. Anthropic's `input_tokens` counts only the uncached
 * part of the prompt, so the prompt is the sum of the three input counts; `cached` is the part
 * read from the cache (a subset of the prompt, as the common model defines it).
 *
 * @see https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching#tracking-cache-performance
 */
export function mapUsage(usage: AnthropicUsage | null | undefined): TokenUsage {
  const cacheRead = usage?.cache_read_input_tokens ?? 0;
  const prompt = (usage?.input_tokens ?? 0) + cacheRead + (usage?.cache_creation_input_tokens ?? 0);
  return createUsage(prompt, usage?.output_tokens ?? 0, cacheRead);
}

/**
 * Folds a `message_delta` usage into what `message_start` reported: delta counts are cumulative,
 * so a non-null field replaces the earlier value and a null one keeps it.
 */
export function mergeUsage(
  earlier: AnthropicUsage,
  later: AnthropicUsage | null | undefined,
): AnthropicUsage {
  if (!later) return earlier;
  return {
    input_tokens: later.input_tokens ?? earlier.input_tokens,
    output_tokens: later.output_tokens ?? earlier.output_tokens,
    cache_read_input_tokens: later.cache_read_input_tokens ?? earlier.cache_read_input_tokens,
    cache_creation_input_tokens: later.cache_creation_input_tokens ?? earlier.cache_creation_input_tokens,
  };
}
