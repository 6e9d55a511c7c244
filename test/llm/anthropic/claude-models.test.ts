import { describe, expect, it } from "vitest";
import {
  parseClaudeModel,
  rejectsTemperature,
  thinkingStyleFor,
} from "../../../src/llm/anthropic/claude-models.js";

describe("thinkingStyleFor", () => {
  it.each([
    ["claude-3-7-sonnet-latest", "budget"],
    ["claude-3-7-sonnet-20250219", "budget"],
    ["claude-opus-4-20250514", "budget"],
    ["claude-opus-4-1-20250805", "budget"],
    ["claude-sonnet-4-5-20250929", "budget"],
    ["claude-haiku-4-5", "budget"],
    ["anthropic.claude-haiku-4-5-20251001-v1:0", "budget"],
    ["claude-opus-4-6", "adaptive"],
    ["claude-sonnet-4-6", "adaptive"],
    ["anthropic.claude-opus-4-6-v1", "adaptive"],
    ["claude-opus-4.6", "adaptive"],
    ["claude-opus-4-7", "adaptive"],
    ["claude-sonnet-5", "adaptive"],
    ["claude-sonnet-5-20260301", "adaptive"],
    ["claude-haiku-5-5", "adaptive"],
    ["claude-fable-5-2", "adaptive"],
    ["claude-mythos-preview", "adaptive"],
    ["deepseek-reasoner", "budget"],
    ["", "budget"],
  ])("%s → %s", (model, style) => {
    expect(thinkingStyleFor(model)).toBe(style);
  });
});

describe("rejectsTemperature", () => {
  it.each([
    ["claude-haiku-4-5", false],
    ["claude-opus-4-6", false],
    ["claude-3-5-haiku-latest", false],
    ["claude-opus-4-7", true],
    ["claude-opus-4-8", true],
    ["claude-sonnet-5", true],
    ["claude-mythos-preview", true],
    ["my-local-model", false],
  ])("%s → %s", (model, rejects) => {
    expect(rejectsTemperature(model)).toBe(rejects);
  });
});

describe("parseClaudeModel", () => {
  it("reads family and version in both id orders, a date is not a minor version", () => {
    expect(parseClaudeModel("claude-opus-4-20250514")).toEqual({ family: "opus", major: 4, minor: 0 });
    expect(parseClaudeModel("claude-3-5-haiku-20241022")).toEqual({ family: "haiku", major: 3, minor: 5 });
    expect(parseClaudeModel("claude-mythos-preview")).toEqual({ family: "mythos", minor: 0 });
    expect(parseClaudeModel("gpt-4o")).toBeUndefined();
  });
});
