import { describe, expect, it } from "vitest";
import {
  createSecretRedactor,
  createStreamRedactor,
  NO_SECRETS,
  REDACTED,
} from "../../src/text/secret-redactor.js";

describe("createSecretRedactor", () => {
  it("replaces every occurrence of every secret", () => {
    const redactor = createSecretRedactor(["sk-ant-0123456789", "nats-password-1"]);
    expect(redactor.isActive).toBe(true);
    expect(redactor.redact("key sk-ant-0123456789 and nats-password-1, again sk-ant-0123456789")).toBe(
      `key ${REDACTED} and ${REDACTED}, again ${REDACTED}`,
    );
  });

  it("returns the same string when no secret occurs", () => {
    const text = "nothing to hide here";
    expect(createSecretRedactor(["sk-ant-0123456789"]).redact(text)).toBe(text);
  });

  it("ignores secrets shorter than 8 characters, blanks and undefined (they would mangle ordinary text)", () => {
    const redactor = createSecretRedactor(["test", "", "   ", undefined, "1234567"]);
    expect(redactor).toBe(NO_SECRETS);
    expect(redactor.redact("a test with 1234567")).toBe("a test with 1234567");
  });

  it("replaces a secret that contains another one whole", () => {
    const redactor = createSecretRedactor(["abcdefgh", "xx-abcdefgh-yy"]);
    expect(redactor.redact("xx-abcdefgh-yy / abcdefgh")).toBe(`${REDACTED} / ${REDACTED}`);
  });

  it("redacts strings at any depth, copying only what changed", () => {
    const redactor = createSecretRedactor(["sk-secret-value"]);
    const untouched = { kind: "ToolCallStarted", arguments: '{"command":"ls"}', nested: [{ a: 1 }] };
    expect(redactor.redactValue(untouched)).toBe(untouched);
    const body = {
      kind: "ChatFailed",
      error: { name: "AuthenticationError", message: "bad key sk-secret-value" },
      list: ["ok", "sk-secret-value"],
      count: 3,
      keep: { x: "y" },
    };
    const redacted = redactor.redactValue(body);
    expect(redacted).toEqual({
      kind: "ChatFailed",
      error: { name: "AuthenticationError", message: `bad key ${REDACTED}` },
      list: ["ok", REDACTED],
      count: 3,
      keep: { x: "y" },
    });
    expect(redacted.keep).toBe(body.keep);
    expect(body.error.message).toBe("bad key sk-secret-value");
  });
});

describe("createStreamRedactor", () => {
  const KEY = "sk-test-SECRET1234567890abcdef";

  /** Every way of cutting `text` in two and three pieces, streamed through a fresh redactor. */
  function everySplit(text: string): string[][] {
    const splits: string[][] = [];
    for (let a = 0; a <= text.length; a++) {
      splits.push([text.slice(0, a), text.slice(a)]);
      for (let b = a; b <= text.length; b += 7)
        splits.push([text.slice(0, a), text.slice(a, b), text.slice(b)]);
    }
    return splits;
  }

  it("catches a secret however the stream cuts it, and sends everything else exactly once", () => {
    const redactor = createSecretRedactor([KEY, "other-secret-99"]);
    const text = `a key: ${KEY}! and other-secret-99, sk-test- (not a key), ends with sk-te`;
    const expected = redactor.redact(text);
    for (const pieces of everySplit(text)) {
      const stream = createStreamRedactor(redactor);
      const sent = pieces.map((piece) => stream.push(piece));
      sent.push(stream.flush());
      for (const piece of sent) expect(piece).not.toContain("SECRET1234");
      expect(sent.join("")).toBe(expected);
    }
  });

  it("holds back only what could begin a secret", () => {
    const stream = createStreamRedactor(createSecretRedactor([KEY]));
    expect(stream.push("hello ")).toBe("hello ");
    expect(stream.push("world sk-te")).toBe("world ");
    expect(stream.push("xt")).toBe("sk-text");
    expect(stream.push("sk-test-SEC")).toBe("");
    expect(stream.flush()).toBe("sk-test-SEC");
    expect(stream.flush()).toBe("");
  });

  it("passes pieces through as they are when there is nothing to hide", () => {
    const stream = createStreamRedactor(NO_SECRETS);
    expect(stream.push("sk-te")).toBe("sk-te");
    expect(stream.push("")).toBe("");
    expect(stream.flush()).toBe("");
  });
});
