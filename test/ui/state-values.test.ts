import { describe, expect, it } from "vitest";
import { formatStateValue, summarizeStates } from "../../src/ui/public/state-values.js";

/** The state-value rules the page and the server's session list share (one file, served as it is). */

describe("formatStateValue", () => {
  it("writes a state value as a dotted path, parallel regions joined and bracketed", () => {
    expect(formatStateValue("idle")).toBe("idle");
    expect(formatStateValue({ iterating: "toolTurn" })).toBe("iterating.toolTurn");
    expect(formatStateValue({ running: { model: "streaming", tools: "idle" } })).toBe(
      "running.(model.streaming, tools.idle)",
    );
    expect(formatStateValue({ done: {} })).toBe("done");
    expect(formatStateValue(null)).toBe("");
    expect(formatStateValue(42)).toBe("");
  });
});

describe("summarizeStates", () => {
  it("prefers the chat, adds the iteration while iterating, else names the session's state", () => {
    expect(summarizeStates({ chat: { iterating: "waiting" }, iteration: "streaming", session: "busy" })).toBe(
      "chat: iterating.waiting · iteration: streaming",
    );
    expect(summarizeStates({ chat: "completed", iteration: "answered" })).toBe("chat: completed");
    expect(summarizeStates({ compaction: "summarising", session: "idle" })).toBe("session: idle");
    expect(summarizeStates({ compaction: "summarising" })).toBe("compaction: summarising");
    expect(summarizeStates({})).toBe("");
  });
});
