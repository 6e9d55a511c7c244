import { describe, expect, it } from "vitest";
import { toThinkingParams } from "../../../src/llm/anthropic/thinking-config.js";

describe("toThinkingParams", () => {
  it("without reasoningEffort: no thinking, max_tokens 4096 by default, temperature allowed", () => {
    expect(toThinkingParams({ model: "claude-haiku-4-5" })).toEqual({
      max_tokens: 4096,
      allowsTemperature: true,
    });
  });

  it.each([
    ["low", 2048, 2048 + 4096],
    ["medium", 8192, 8192 + 4096],
    ["high", 24576, 24576 + 4096],
  ] as const)("budget style, %s → budget_tokens %d, max_tokens %d", (effort, budget, maxTokens) => {
    expect(toThinkingParams({ model: "claude-sonnet-4-5", reasoningEffort: effort })).toEqual({
      thinking: { type: "enabled", budget_tokens: budget },
      max_tokens: maxTokens,
      allowsTemperature: false,
    });
  });

  it("budget style keeps a max_tokens above the budget and adds the budget to one at or below it", () => {
    expect(
      toThinkingParams({ model: "claude-haiku-4-5", reasoningEffort: "low", maxTokens: 3000 }).max_tokens,
    ).toBe(3000);
    expect(
      toThinkingParams({ model: "claude-haiku-4-5", reasoningEffort: "low", maxTokens: 2048 }).max_tokens,
    ).toBe(4096);
  });

  it("adaptive style: thinking.adaptive + output_config.effort, the caller's max_tokens or 16384", () => {
    expect(toThinkingParams({ model: "claude-opus-4-6", reasoningEffort: "medium" })).toEqual({
      thinking: { type: "adaptive" },
      output_config: { effort: "medium" },
      max_tokens: 16384,
      allowsTemperature: false,
    });
    expect(
      toThinkingParams({ model: "claude-sonnet-5", reasoningEffort: "low", maxTokens: 2000 }).max_tokens,
    ).toBe(2000);
  });
});
