import { describe, expect, it } from "vitest";
import type { EventBody } from "../../src/events/types.js";
import { AnswerGate } from "../../src/protocol/answer-gate.js";

const usage = { prompt: 1, completion: 1, total: 2, cached: 0 };
const response = (content: string, toolCalls = 0): EventBody => ({
  kind: "ModelResponse",
  content,
  toolCalls,
  usage,
  purpose: "chat",
});

describe("AnswerGate", () => {
  it("releases nothing while a request streams, and a reset's text never", () => {
    const gate = new AnswerGate();
    const events: EventBody[] = [
      { kind: "ModelStreamSegmentStart", attempt: 1 },
      { kind: "ModelTextDelta", delta: "Lost " },
      {
        kind: "ModelStreamSegmentReset",
        attempt: 1,
        reason: "cut",
        error: { code: "internal", retryable: false, name: "Error", message: "cut" },
      },
      { kind: "ModelStreamSegmentStart", attempt: 2 },
      { kind: "ModelTextDelta", delta: "Kept" },
    ];
    for (const event of events) expect(gate.push(event)).toBe("");
    expect(gate.push(response("Kept"))).toBe("Kept");
    expect(gate.released).toBe("Kept");
    expect(gate.remainder("Kept")).toBe("");
  });

  it("holds back the narration of a request that calls tools, and compaction summaries", () => {
    const gate = new AnswerGate();
    expect(gate.push(response("Let me look.", 1))).toBe("");
    expect(
      gate.push({ kind: "ModelResponse", content: "summary", toolCalls: 0, usage, purpose: "compaction" }),
    ).toBe("");
    expect(gate.push(response("It is 4."))).toBe("It is 4.");
  });

  it("tells what is left of the result to send", () => {
    const gate = new AnswerGate();
    expect(gate.remainder("(no reply)")).toBe("(no reply)");
    gate.push(response("abc"));
    expect(gate.remainder("abcdef")).toBe("def");
    expect(gate.remainder("xyz")).toBe("");
  });
});
