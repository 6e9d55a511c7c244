import { describe, expect, it } from "vitest";
import { createRefusalLog } from "../../src/host/refusal-log.js";

describe("createRefusalLog", () => {
  it("names the rule, logs each rule at most once per interval and counts the rest", () => {
    let now = 0;
    const lines: string[] = [];
    const refused = createRefusalLog((line) => lines.push(line), { now: () => now, intervalMs: 1_000 });
    refused("max-sessions", "refused a new session bot/a: the host is full");
    refused("max-sessions", "refused a new session bot/b: the host is full");
    refused("token-budget", 'refused a chat of tenant "B": budget spent');
    now = 999;
    refused("max-sessions", "refused a new session bot/c: the host is full");
    now = 1_000;
    refused("max-sessions", "refused a new session bot/d: the host is full");
    now = 5_000;
    refused("max-sessions", "no reason given");
    expect(lines).toEqual([
      "refused a new session bot/a (rule: max-sessions): the host is full",
      'refused a chat of tenant "B" (rule: token-budget): budget spent',
      "refused a new session bot/d (rule: max-sessions): the host is full (2 more since the last line)",
      "no reason given (rule: max-sessions)",
    ]);
  });
});
