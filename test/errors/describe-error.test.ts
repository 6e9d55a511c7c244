import { describe, expect, it } from "vitest";
import { describeError } from "../../src/public/errors.js";

describe("describeError", () => {
  it("gives an Error's message, and anything else as String() makes it", () => {
    expect(describeError(new TypeError("x is undefined"))).toBe("x is undefined");
    expect(describeError("a thrown string")).toBe("a thrown string");
    expect(describeError(42)).toBe("42");
    expect(describeError(undefined)).toBe("undefined");
  });
});
