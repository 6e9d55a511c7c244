import type { OutputConfig, ThinkingConfigParam } from "@anthropic-ai/sdk/resources/messages";
import type { LlmOptions, ReasoningEffort } from "../types.js";
import { rejectsTemperature, thinkingStyleFor } from "./claude-models.js";

/** Thinking budgets of the budget style, per effort. */
export const THINKING_BUDGETS: Readonly<Record<ReasoningEffort, number>> = {
  low: 2048,
  medium: 8192,
  high: 24576,
};

/** max_tokens when the caller gives none (Anthropic requires one). */
export const DEFAULT_MAX_TOKENS = 4096;

/**
 * max_tokens for the adaptive style when the caller gives none: thinking counts toward
 * max_tokens, so the plain default would leave little room for the answer.
 */
export const DEFAULT_ADAPTIVE_MAX_TOKENS = 16384;

/** The body fields that depend on reasoningEffort. */
export interface ThinkingParams {
  /** Absent when thinking is off. */
  thinking?: ThinkingConfigParam;
  output_config?: OutputConfig;
  max_tokens: number;
  /**
   * False when thinking is on (Anthropic rejects `temperature` other than 1 with thinking) or the
   * model rejects sampling parameters altogether.
   */
  allowsTemperature: boolean;
}

/**
 * reasoningEffort → `thinking` (+ `output_config`) in the model's style (see
 * {@link thinkingStyleFor}) and the max_tokens to send. With the budget style max_tokens must
 * exceed budget_tokens: without a max_tokens the budget is added to the default (room for the
 * answer); a max_tokens at or below the budget is read as the room wanted for the answer, and the
 * budget is added on top of it.
 *
 * @see https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size
 */
export function toThinkingParams(
  options: Pick<LlmOptions, "model" | "maxTokens" | "reasoningEffort">,
): ThinkingParams {
  const effort = options.reasoningEffort;
  if (effort === undefined) {
    return {
      max_tokens: options.maxTokens ?? DEFAULT_MAX_TOKENS,
      allowsTemperature: !rejectsTemperature(options.model),
    };
  }
  if (thinkingStyleFor(options.model) === "adaptive") {
    return {
      thinking: { type: "adaptive" },
      output_config: { effort },
      max_tokens: options.maxTokens ?? DEFAULT_ADAPTIVE_MAX_TOKENS,
      allowsTemperature: false,
    };
  }
  const budget = THINKING_BUDGETS[effort];
  const requested = options.maxTokens;
  return {
    thinking: { type: "enabled", budget_tokens: budget },
    max_tokens:
      requested !== undefined && requested > budget ? requested : budget + (requested ?? DEFAULT_MAX_TOKENS),
    allowsTemperature: false,
  };
}
