import { describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/events/types.js";
import { TokenBudget } from "../../src/host/token-budget.js";

function response(prompt: number, completion: number): AgentEvent {
  return {
    kind: "ModelResponse",
    content: "",
    toolCalls: 0,
    usage: { prompt, completion, total: prompt + completion, cached: 0 },
    agent: "bot",
    session: "s",
    host: "h",
    chatId: "c",
    seq: 1,
    ts: "2026-01-01T00:00:00.000Z",
    iteration: 1,
  } as AgentEvent;
}

describe("TokenBudget", () => {
  it("adds up the model requests' tokens in the period and refuses once they reach the budget", () => {
    let now = Date.UTC(2026, 0, 1, 10);
    const budget = new TokenBudget("A", { tokens: 100, per: "hour" }, () => now);
    expect(budget.check()).toEqual({ isExceeded: false });
    budget.record(response(40, 20));
    budget.record({ ...response(999, 999), kind: "ChatCompleted" } as unknown as AgentEvent);
    expect(budget.used).toBe(60);
    expect(budget.check()).toEqual({ isExceeded: false });
    budget.record(response(30, 10));
    expect(budget.check()).toEqual({
      isExceeded: true,
      reason: expect.stringContaining('tenant "A" used its budget of 100 tokens per hour (100 used)'),
    });
    // The next hour starts over.
    now += 60 * 60 * 1000;
    expect(budget.check()).toEqual({ isExceeded: false });
    expect(budget.used).toBe(0);
  });
});
