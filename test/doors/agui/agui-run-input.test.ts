import { describe, expect, it } from "vitest";
import { parseRunInput } from "../../../src/doors/agui/agui-run-input.js";

/** Reading a RunAgentInput: what is sent, what is answered, and what is refused with a reason. */

const base = { threadId: "s1", runId: "r1" };

describe("parseRunInput", () => {
  it("sends the last message's text when it is the user's", () => {
    const parsed = parseRunInput({
      ...base,
      messages: [
        { id: "1", role: "user", content: "first" },
        { id: "2", role: "assistant", content: "ok" },
        {
          id: "3",
          role: "user",
          content: [
            { type: "text", text: "second " },
            { type: "text", text: "part" },
          ],
        },
      ],
    });
    expect(parsed).toEqual({ ok: true, value: { ...base, kind: "chat", text: "second part" } });
  });

  it("refuses input with nothing new to send, or a thread that is no session name", () => {
    const afterAnswer = parseRunInput({
      ...base,
      messages: [
        { id: "1", role: "user", content: "hi" },
        { id: "2", role: "assistant", content: "hello" },
      ],
    });
    expect(afterAnswer).toEqual({
      ok: false,
      message: "the last message must be the user's: its text is what the agent is sent",
    });
    expect(parseRunInput({ ...base, messages: [{ id: "1", role: "user", content: "  " }] })).toMatchObject({
      ok: false,
      message: "the user's message has no text",
    });
    expect(parseRunInput({ ...base, threadId: "a b", messages: [] })).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^threadId must be a session name/),
    });
    expect(parseRunInput({ threadId: "s", messages: [] })).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^RunAgentInput\.runId: /),
    });
  });

  it("reads resume entries as decisions and refuses an answer it would have to guess", () => {
    const resumed = parseRunInput({
      ...base,
      messages: [],
      resume: [
        { interruptId: "approval-3-a", status: "resolved", payload: { approved: true } },
        { interruptId: "approval-4-b", status: "resolved", payload: false },
        { interruptId: "approval-5-c", status: "resolved", payload: { approved: false, reason: "no" } },
        { interruptId: "approval-6-d", status: "cancelled" },
      ],
    });
    expect(resumed).toEqual({
      ok: true,
      value: {
        ...base,
        kind: "resume",
        resume: [
          { interruptId: "approval-3-a", approved: true },
          { interruptId: "approval-4-b", approved: false },
          { interruptId: "approval-5-c", approved: false, reason: "no" },
          { interruptId: "approval-6-d", approved: false, reason: "the approval was cancelled" },
        ],
      },
    });
    const unclear = parseRunInput({
      ...base,
      messages: [],
      resume: [{ interruptId: "approval-3-a", status: "resolved", payload: "yes" }],
    });
    expect(unclear).toEqual({
      ok: false,
      message: "resume approval-3-a: payload must be { approved: boolean, reason?: string } (or a boolean)",
    });
  });
});
