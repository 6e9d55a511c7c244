import { describe, expect, it } from "vitest";
import { fitEventToPayload } from "../../src/events/fit-event.js";
import type { AgentEvent } from "../../src/events/types.js";

const base = {
  agent: "bot",
  session: "s1",
  chatId: "c-1",
  seq: 7,
  ts: "2025-01-01T00:00:00.000Z",
  iteration: 0,
} as const;

const usage = { prompt: 1, completion: 2, total: 3, cached: 0 };

function bytesOf(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

describe("fitEventToPayload", () => {
  it("cuts the longest string to fit, ends it with a visible marker and sets truncated", () => {
    const result = `${"a".repeat(6_000)}THE END`;
    const event: AgentEvent = { ...base, kind: "ChatCompleted", result, usage, tokenUsed: 3 };
    const json = fitEventToPayload(event, 2_000);
    expect(json).toBeDefined();
    expect(bytesOf(json!)).toBeLessThanOrEqual(2_000);
    const fitted = JSON.parse(json!) as Record<string, unknown>;
    expect(fitted).toMatchObject({ ...base, kind: "ChatCompleted", usage, tokenUsed: 3, truncated: true });
    const text = fitted.result as string;
    expect(text.startsWith("a".repeat(1_500))).toBe(true);
    expect(text).toMatch(
      /…\[truncated: \d+ more characters did not fit the bus's 2000-byte message limit\]$/,
    );
    // The event itself is left as it was (other listeners share it).
    expect(event.result).toBe(result);
  });

  it("counts escaped and multi-byte characters, and never splits a surrogate pair", () => {
    const delta = `${'"\\\n'.repeat(1_000)}${"😀".repeat(1_000)}${"é".repeat(1_000)}`;
    const event: AgentEvent = { ...base, kind: "ModelTextDelta", iteration: 1, delta };
    for (const limit of [600, 1_111, 3_000, 7_001]) {
      const json = fitEventToPayload(event, limit)!;
      expect(bytesOf(json)).toBeLessThanOrEqual(limit);
      const text = (JSON.parse(json) as { delta: string }).delta;
      expect(text).toContain("…[truncated: ");
      // A lone surrogate would not survive a UTF-8 round trip.
      expect(Buffer.from(text, "utf8").toString("utf8")).toBe(text);
    }
  });

  it("shortens nested strings too (a tool failure's error message) and leaves the identity alone", () => {
    const event: AgentEvent = {
      ...base,
      kind: "ToolCallFailed",
      toolName: "shell",
      toolCallId: "call-1",
      error: { code: "internal", retryable: false, name: "Error", message: "m".repeat(5_000) },
      result: "r".repeat(5_000),
      durationMs: 5,
    };
    const json = fitEventToPayload(event, 3_000)!;
    expect(bytesOf(json)).toBeLessThanOrEqual(3_000);
    const fitted = JSON.parse(json) as typeof event & { truncated: true };
    expect(fitted).toMatchObject({ ...base, toolName: "shell", toolCallId: "call-1", truncated: true });
    expect(fitted.result).toContain("…[truncated: ");
    expect(fitted.error.message).toContain("…[truncated: ");
  });

  it("gives up (undefined) when the event cannot fit even with every string cut", () => {
    const event: AgentEvent = { ...base, kind: "ModelTextDelta", iteration: 1, delta: "x".repeat(1_000) };
    expect(fitEventToPayload(event, 100)).toBeUndefined();
  });
});
