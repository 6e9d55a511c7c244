import { describe, expect, it } from "vitest";
import { NOT_UTF8 } from "../../src/bus/bus.js";
import { MAX_PAYLOAD_BYTES } from "../../src/bus/contract.js";
import { toBusMessage } from "../../src/bus/inbound-message.js";

const bytes = (text: string) => new TextEncoder().encode(text);

describe("toBusMessage (every door's conversion)", () => {
  it("decodes UTF-8 and keeps the reply subject and the headers as sent", () => {
    const headers = new Map([["Agentloop-Forward-Hops", "1"]]);
    const message = toBusMessage({
      subject: "agentloop.agents.bot.chat",
      data: bytes('{"text":"héllo"}'),
      reply: "_INBOX.1",
      headers: { keys: () => [...headers.keys()], get: (key) => headers.get(key) ?? "" },
    });
    expect(message).toEqual({
      subject: "agentloop.agents.bot.chat",
      data: '{"text":"héllo"}',
      reply: "_INBOX.1",
      headers: { "Agentloop-Forward-Hops": "1" },
    });
  });

  it("marks bytes that are not UTF-8 as malformed instead of running on U+FFFD", () => {
    const data = new Uint8Array([...bytes('{"text":"hi '), 0xff, 0xfe, 0x22, 0x7d]);
    expect(toBusMessage({ subject: "s", data }).malformed).toBe(NOT_UTF8);
  });

  it("marks a payload over the request limit as malformed without decoding it", () => {
    const data = new Uint8Array(MAX_PAYLOAD_BYTES + 1).fill(0x20);
    const message = toBusMessage({ subject: "s", data }, { maxBytes: MAX_PAYLOAD_BYTES });
    expect(message.malformed).toMatch(/over the 1048576-byte limit/);
    expect(message.data).toBe("");
    // Without a limit (events, replies), the same bytes are a message like any other.
    expect(toBusMessage({ subject: "s", data }).malformed).toBeUndefined();
  });
});
