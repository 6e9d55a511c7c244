import { describe, expect, it } from "vitest";
import {
  type ChatReply,
  ERROR_CODES,
  errorReply,
  MAX_PAYLOAD_BYTES,
  parseChatReply,
  parseChatRequest,
  parseControlReply,
  parseControlRequest,
} from "../../src/bus/contract.js";

describe("parseChatRequest", () => {
  it("applies the defaults", () => {
    expect(parseChatRequest('{"session":"s1","text":"hello"}')).toEqual({
      ok: true,
      value: { session: "s1", text: "hello", type: "user", stackable: false },
    });
  });

  it("keeps the optional fields and ignores unknown ones", () => {
    const result = parseChatRequest(
      JSON.stringify({
        session: "s-1_A",
        text: "done",
        type: "task_result",
        stackable: true,
        id: "m1",
        x: 1,
      }),
    );
    expect(result).toEqual({
      ok: true,
      value: { session: "s-1_A", text: "done", type: "task_result", stackable: true, id: "m1" },
    });
  });

  it("accepts a text as large as the payload cap allows", () => {
    const text = "é".repeat(MAX_PAYLOAD_BYTES / 2 - 64);
    const result = parseChatRequest(JSON.stringify({ session: "s", text }));
    expect(result.ok).toBe(true);
  });

  it.each([
    ["", /not valid JSON/],
    ["{", /not valid JSON/],
    ["hello", /not valid JSON/],
    ["null", /must be a JSON object/],
    ["42", /must be a JSON object/],
    ['"text"', /must be a JSON object/],
    ['[{"session":"s","text":"x"}]', /must be a JSON object/],
    ["{}", /missing field "session"/],
    ['{"session":"s"}', /missing field "text"/],
    ['{"text":"x"}', /missing field "session"/],
    ['{"session":5,"text":"x"}', /field "session": .*expected string/],
    ['{"session":"s","text":["x"]}', /field "text": .*expected string/],
    ['{"session":"s","text":""}', /field "text": must not be empty/],
    ['{"session":"a.b","text":"x"}', /field "session": must match/],
    ['{"session":"a b","text":"x"}', /field "session": must match/],
    ['{"session":"agentloop.events.>","text":"x"}', /field "session": must match/],
    [`{"session":"${"s".repeat(65)}","text":"x"}`, /field "session": must match/],
    ['{"session":"","text":"x"}', /field "session": must match/],
    ['{"session":"s","text":"x","stackable":"yes"}', /field "stackable": .*expected boolean/],
    ['{"session":"s","text":"x","type":7}', /field "type"/],
    ['{"session":"s","text":"x","type":""}', /field "type"/],
    ['{"session":"s","text":"x","id":12}', /field "id"/],
    // A lone surrogate (half an emoji) would poison the session's history.
    ['{"session":"s","text":"half \\ud83d an emoji"}', /field "text": must be well-formed Unicode/],
    ['{"session":"s","text":"\\udc00"}', /field "text": must be well-formed Unicode/],
    ['{"session":"s","text":"x","type":"task\\ud800"}', /field "type": must be well-formed Unicode/],
    ['{"session":"s","text":"x","id":"m\\udfff1"}', /field "id": must be well-formed Unicode/],
  ])("refuses %j as bad_request (%s)", (payload, reason) => {
    const result = parseChatRequest(payload);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.code).toBe("bad_request");
    expect(result.error.message).toMatch(reason);
  });

  it("accepts well-formed text outside the BMP (a whole emoji, escaped or not)", () => {
    expect(parseChatRequest('{"session":"s","text":"\\ud83d\\ude00 and 😀"}')).toMatchObject({
      ok: true,
      value: { text: "😀 and 😀" },
    });
  });

  it("refuses an oversized payload, saying so", () => {
    const payload = JSON.stringify({ session: "s", text: "x".repeat(MAX_PAYLOAD_BYTES) });
    const result = parseChatRequest(payload);
    expect(result).toEqual({
      ok: false,
      error: {
        code: "bad_request",
        message: `chat request too large: ${Buffer.byteLength(payload)} bytes (max ${MAX_PAYLOAD_BYTES})`,
      },
    });
  });

  it("counts UTF-8 bytes, not characters, against the cap", () => {
    const text = "€".repeat(Math.ceil(MAX_PAYLOAD_BYTES / 3) + 10);
    const result = parseChatRequest(JSON.stringify({ session: "s", text }));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.error.message).toMatch(/too large/);
  });
});

describe("parseControlRequest", () => {
  it.each([
    ['{"session":"s","command":"stop"}', { session: "s", command: "stop" }],
    ['{"session":"s","command":"new"}', { session: "s", command: "new" }],
    [
      '{"session":"s","command":"compact","topic":"the plan"}',
      { session: "s", command: "compact", topic: "the plan" },
    ],
    [
      '{"session":"s","command":"approve","toolCallId":"c1","arguments":"{}"}',
      { session: "s", command: "approve", toolCallId: "c1", arguments: "{}" },
    ],
    [
      '{"session":"s","command":"deny","toolCallId":"c1","reason":"no"}',
      { session: "s", command: "deny", toolCallId: "c1", reason: "no" },
    ],
    ['{"session":"s","command":"cancel","id":"r1"}', { session: "s", command: "cancel", id: "r1" }],
  ])("accepts %s", (payload, value) => {
    expect(parseControlRequest(payload)).toEqual({ ok: true, value });
  });

  it.each([
    ["nope", /not valid JSON/],
    ["[]", /must be a JSON object/],
    ['{"session":"s"}', /missing field "command"/],
    ['{"command":"stop"}', /missing field "session"/],
    ['{"session":"s","command":"restart"}', /field "command"/],
    ['{"session":"s.t","command":"stop"}', /field "session": must match/],
    ['{"session":"s","command":"compact","topic":3}', /field "topic"/],
    ['{"session":"s","command":"compact","topic":"\\ud800"}', /field "topic": must be well-formed Unicode/],
    ['{"session":"s","command":"approve"}', /missing field "toolCallId"/],
    ['{"session":"s","command":"deny","toolCallId":""}', /field "toolCallId"/],
    ['{"session":"s","command":"cancel"}', /missing field "id"/],
  ])("refuses %j as bad_request (%s)", (payload, reason) => {
    const result = parseControlRequest(payload);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.error.code).toBe("bad_request");
      expect(result.error.message).toMatch(reason);
    }
  });
});

describe("replies", () => {
  it("has the stable error codes", () => {
    expect(ERROR_CODES).toEqual([
      "bad_request",
      "unknown_agent",
      "queue_overflow",
      "cancelled",
      "llm_error",
      "internal",
      "overloaded",
      "reply_too_large",
      "budget_exceeded",
      "forbidden",
      "unavailable",
      "cycle",
    ]);
  });

  it("round-trips a successful chat reply", () => {
    const reply: ChatReply = {
      ok: true,
      session: "s",
      result: "hi",
      usage: { prompt: 10, completion: 2, total: 12, cached: 0 },
    };
    expect(parseChatReply(JSON.stringify(reply))).toEqual({ ok: true, value: reply });
  });

  it("round-trips an error reply built by errorReply", () => {
    const reply = errorReply("queue_overflow", "dropped: more than 200 queued");
    expect(reply).toEqual({
      ok: false,
      error: { code: "queue_overflow", message: "dropped: more than 200 queued" },
    });
    expect(parseChatReply(JSON.stringify(reply))).toEqual({ ok: true, value: reply });
    expect(parseControlReply(JSON.stringify(reply))).toEqual({ ok: true, value: reply });
  });

  it("round-trips a reply_too_large reply with the chat's id", () => {
    const reply: ChatReply = {
      ...errorReply("reply_too_large", "the reply is 2000000 bytes"),
      chatId: "c-42",
      id: "mine",
    };
    expect(parseChatReply(JSON.stringify(reply))).toEqual({ ok: true, value: reply });
  });

  it("refuses malformed replies", () => {
    expect(parseChatReply('{"ok":true,"session":"s"}').ok).toBe(false);
    expect(parseChatReply('{"ok":false,"error":{"code":"weird","message":"x"}}').ok).toBe(false);
    expect(parseControlReply('{"ok":"yes"}').ok).toBe(false);
    expect(parseControlReply('{"ok":true}')).toEqual({ ok: true, value: { ok: true } });
  });
});
