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

  it("refuses an empty payload and an envelope with an empty prompt, as the reference decoders do", () => {
    expect(parsePromptPayload("")).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/^empty payload/),
    });
    expect(parsePromptPayload(JSON.stringify({ prompt: "" }))).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/^bad envelope: field "prompt": must be a non-empty string/),
    });
  });

  it("takes a blank prompt verbatim: only a zero-byte payload is empty", () => {
    expect(parsePromptPayload("  \n")).toEqual({ ok: true, value: { prompt: "  \n" } });
    expect(parsePromptPayload(JSON.stringify({ prompt: " " }))).toEqual({ ok: true, value: { prompt: " " } });
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

  it("refuses a payload that starts with { (after ASCII whitespace) but is no JSON object", () => {
    for (const payload of ["{not json", " \t\r\n{not json", '{"prompt": "x"} trailing']) {
      expect(parsePromptPayload(payload)).toMatchObject({
        ok: false,
        reason: expect.stringMatching(/^malformed JSON envelope/),
      });
    }
  });

  it("takes other text as the prompt itself, even when it is JSON that is not an object", () => {
    expect(parsePromptPayload("[1, 2]")).toEqual({ ok: true, value: { prompt: "[1, 2]" } });
    expect(parsePromptPayload('"quoted"')).toEqual({ ok: true, value: { prompt: '"quoted"' } });
    // Only tab, LF, CR and space are skipped: after a no-break space, { is text.
    expect(parsePromptPayload("\u00a0{x")).toEqual({ ok: true, value: { prompt: "\u00a0{x" } });
  });

  it("refuses an attachment whose file name is a path", () => {
    for (const filename of ["../etc/passwd", "a/b", "a\\b", "..", "."]) {
      const payload = JSON.stringify({ prompt: "x", attachments: [{ filename, content: "aGk=" }] });
      expect(parsePromptPayload(payload)).toMatchObject({
        ok: false,
        reason: expect.stringContaining('field "attachments.0.filename"'),
      });
    }
  });

  it("refuses a lone surrogate", () => {
    expect(parsePromptPayload(JSON.stringify({ prompt: "half \ud83d" }))).toMatchObject({ ok: false });
  });
});
