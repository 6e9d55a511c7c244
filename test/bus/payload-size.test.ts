import { describe, expect, it } from "vitest";
import { isOverMaxPayload } from "../../src/bus/payload-size.js";

describe("isOverMaxPayload", () => {
  it("counts UTF-8 bytes, not characters", () => {
    expect(isOverMaxPayload("abcd", 4)).toBe(false);
    expect(isOverMaxPayload("abcde", 4)).toBe(true);
    // "é" is 2 bytes, "€" 3, "😀" 4 (two UTF-16 units).
    expect(isOverMaxPayload("éé", 4)).toBe(false);
    expect(isOverMaxPayload("ééa", 4)).toBe(true);
    expect(isOverMaxPayload("€a", 4)).toBe(false);
    expect(isOverMaxPayload("😀", 4)).toBe(false);
    expect(isOverMaxPayload("😀a", 4)).toBe(true);
  });

  it("has no limit at Infinity", () => {
    expect(isOverMaxPayload("x".repeat(100_000), Number.POSITIVE_INFINITY)).toBe(false);
  });
});
