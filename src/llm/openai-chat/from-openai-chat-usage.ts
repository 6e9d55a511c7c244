import { createUsage, emptyUsage, type TokenUsage } from "../types.js";
import type { OpenAIChatUsage } from "./openai-chat-wire.js";

/** Chat usage → common usage; cached tokens from `prompt_tokens_details` (or DeepSeek's field). */
export function fromOpenAIChatUsage(usage: OpenAIChatUsage | null | undefined): TokenUsage {
  if (!usage) return emptyUsage();
  const cached = usage.prompt_tokens_details?.cached_tokens ?? usage.prompt_cache_hit_tokens ?? 0;
  return createUsage(usage.prompt_tokens ?? 0, usage.completion_tokens ?? 0, cached);
}
