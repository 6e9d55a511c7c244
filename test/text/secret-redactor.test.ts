import { describe, expect, it } from "vitest";
import { createSecretRedactor, NO_SECRETS, REDACTED } from "../../src/text/secret-redactor.js";

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
