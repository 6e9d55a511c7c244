import { describe, expect, it } from "vitest";
import { parsePromptPayload } from "../../src/protocol/prompt-envelope.js";

describe("parsePromptPayload (§5)", () => {
  it("takes plain text as the prompt", () => {
    expect(parsePromptPayload("hello there")).toEqual({ ok: true, value: { prompt: "hello there" } });
  });

  it("reads the JSON envelope, keeping unknown fields and attachments", () => {
    const payload = JSON.stringify({
      prompt: "hi",
      attachments: [{ filename: "a.txt", content: "aGk=" }],
      x: 1,
    });
    expect(parsePromptPayload(payload)).toEqual({
      ok: true,
      value: { prompt: "hi", attachments: [{ filename: "a.txt", content: "aGk=" }], x: 1 },
    });
  });

  it("refuses an empty or blank prompt, as text or in an envelope", () => {
    for (const payload of ["", "  \n", JSON.stringify({ prompt: "" })]) {
      expect(parsePromptPayload(payload)).toEqual({ ok: false, reason: "empty prompt" });
    }
  });

  it("refuses a bad envelope with the field", () => {
    expect(parsePromptPayload(JSON.stringify({ prompt: 5 }))).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/^bad envelope: field "prompt"/),
    });
    expect(parsePromptPayload(JSON.stringify({ text: "no prompt field" }))).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/^bad envelope: field "prompt"/),
    });
    expect(
      parsePromptPayload(
        JSON.stringify({ prompt: "x", attachments: [{ filename: "a", content: "not base64!" }] }),
      ),
    ).toMatchObject({ ok: false, reason: expect.stringContaining('field "attachments.0.content"') });
  });

  it("takes text that only looks like JSON as the prompt itself", () => {
    expect(parsePromptPayload("{not json")).toEqual({ ok: true, value: { prompt: "{not json" } });
    expect(parsePromptPayload("[1, 2]")).toEqual({ ok: true, value: { prompt: "[1, 2]" } });
  });

  it("refuses a lone surrogate", () => {
    expect(parsePromptPayload(JSON.stringify({ prompt: "half \ud83d" }))).toMatchObject({ ok: false });
  });
});
