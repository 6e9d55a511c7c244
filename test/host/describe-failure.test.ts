import { describe, expect, it } from "vitest";
import { describeFailure } from "../../src/host/describe-failure.js";

describe("describeFailure", () => {
  it("caps a long message on whole characters: a reply never carries half an emoji (issue 9)", () => {
    const { code, message } = describeFailure(new Error(`${"x".repeat(999)}😀 and more`));
    expect(code).toBe("internal");
    expect(message).toBe(`${"x".repeat(999)}…`);
    expect(message.isWellFormed()).toBe(true);
  });
});
