import { createUsage, emptyUsage, type TokenUsage } from "../types.js";
import type { ResponsesUsage } from "./openai-responses-wire.js";

/** Responses usage → common usage; cached tokens from `input_tokens_details.cached_tokens`. */
export function fromOpenAIResponsesUsage(usage: ResponsesUsage | null | undefined): TokenUsage {
  if (!usage) return emptyUsage();
  return createUsage(
    usage.input_tokens ?? 0,
    usage.output_tokens ?? 0,
    usage.input_tokens_details?.cached_tokens ?? 0,
  );
}
