import { describe, expect, it } from "vitest";
import type { ChatProgress } from "../../src/journal/chat-journal.js";
import { INTERRUPTED_TOOL_RESULT, interruptedResult, planResume } from "../../src/journal/resume-plan.js";
import type { Message } from "../../src/llm/types.js";

const before: Message[] = [
  { role: "user", content: "earlier" },
  { role: "assistant", content: "ok" },
];
const user: Message = { role: "user", content: "do it" };
const assistant: Message = {
  role: "assistant",
  content: "",
  toolCalls: [
    { id: "a", name: "read", arguments: "{}" },
    { id: "b", name: "write", arguments: "{}" },
    { id: "c", name: "write", arguments: "{}" },
    { id: "d", name: "write", arguments: "{}" },
  ],
};
const progress = (overrides: Partial<ChatProgress> = {}): ChatProgress => ({
  chatId: "c1",
  userText: "do it",
  chatStart: 2,
  iteration: 1,
  messages: [user],
  inFlight: null,
  ...overrides,
});
const isIdempotent = (call: { name: string }) => call.name === "read";

describe("planResume", () => {
  it("starts over from the text when not even the user message was journaled", () => {
    expect(planResume(before, progress({ messages: [] }), isIdempotent)).toEqual({
      kind: "restart",
      chatId: "c1",
      userText: "do it",
    });
  });

  it("goes on after the stored user message, or stores it first", () => {
    for (const history of [before, [...before, user]]) {
      expect(planResume(history, progress(), isIdempotent)).toMatchObject({
        kind: "continue",
        conversation: [...before, user],
        persisted: history.length,
        chatStart: 2,
        iteration: 1,
        inFlight: null,
      });
    }
  });

  it("sorts the calls in flight: settled, run again (idempotent or never started), in doubt", () => {
    const settled: Message = { role: "tool", toolCallId: "d", toolName: "write", content: "done" };
    const plan = planResume(
      [...before, user],
      progress({ inFlight: { assistant, started: ["b", "d"], results: { d: settled }, appended: [] } }),
      isIdempotent,
    );
    expect(plan.kind).toBe("continue");
    if (plan.kind !== "continue") return;
    expect(plan.inFlight?.run.map((call) => call.id)).toEqual(["a", "c"]);
    expect(plan.inFlight?.inDoubt.map((call) => call.id)).toEqual(["b"]);
  });

  it("resumes nothing when the chat ended or the history moved on", () => {
    const answer: Message = { role: "assistant", content: "done" };
    const ended = progress({ messages: [user, answer] });
    // It ended: its answer is known (a retry of its request id is answered with it).
    expect(planResume([...before, user, answer], ended, isIdempotent)).toEqual({
      kind: "none",
      result: "done",
    });
    // `/new` cleared it, a compaction replaced it, or another chat's messages are there.
    expect(planResume([], progress(), isIdempotent)).toEqual({ kind: "none" });
    expect(planResume([...before, { role: "user", content: "other" }], progress(), isIdempotent)).toEqual({
      kind: "none",
    });
    expect(planResume([...before, user, answer, user], ended, isIdempotent)).toEqual({ kind: "none" });
  });

  it("gives a call in doubt the interrupted result", () => {
    expect(interruptedResult({ id: "b", name: "write", arguments: "{}" })).toEqual({
      role: "tool",
      toolCallId: "b",
      toolName: "write",
      content: INTERRUPTED_TOOL_RESULT,
    });
    expect(JSON.parse(INTERRUPTED_TOOL_RESULT)).toEqual({
      error: "interrupted",
      detail: "the host stopped while this tool ran; it may or may not have taken effect",
    });
  });
});
