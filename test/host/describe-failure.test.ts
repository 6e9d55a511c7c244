import { describe, expect, it } from "vitest";
import { ChatFailedError } from "../../src/agent/chat-errors.js";
import { toErrorInfo } from "../../src/errors/error-info.js";
import { UnavailableError } from "../../src/errors/unavailable-error.js";
import { describeFailure } from "../../src/host/describe-failure.js";

describe("describeFailure", () => {
  it("caps a long message on whole characters: a reply never carries half an emoji", () => {
    const { code, message } = describeFailure(new Error(`${"x".repeat(999)}😀 and more`));
    expect(code).toBe("internal");
    expect(message).toBe(`${"x".repeat(999)}…`);
    expect(message.isWellFormed()).toBe(true);
  });

  it("answers a chat whose JetStream write outlasted its retries `unavailable`, not `internal: timeout`", () => {
    const unavailable = new UnavailableError("JetStream did not acknowledge a write to h.s1 within 30 s");
    expect(describeFailure(unavailable)).toEqual({ code: "unavailable", message: unavailable.message });
    const failed = new ChatFailedError(toErrorInfo(unavailable), {
      prompt: 0,
      completion: 0,
      total: 0,
      cached: 0,
    });
    expect(describeFailure(failed).code).toBe("unavailable");
    expect(failed.retryable).toBe(true);
  });
});
