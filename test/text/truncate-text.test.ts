import { describe, expect, it } from "vitest";
import { sliceCodePoints, truncateText } from "../../src/text/truncate-text.js";

describe("sliceCodePoints", () => {
  it("keeps short text as it is", () => {
    expect(sliceCodePoints("abc", 3)).toBe("abc");
    expect(sliceCodePoints("", 0)).toBe("");
  });

  it("cuts at the length, one unit earlier when that would split a surrogate pair", () => {
    expect(sliceCodePoints("abcdef", 4)).toBe("abcd");
    expect(sliceCodePoints("a😀b", 2)).toBe("a");
    expect(sliceCodePoints("a😀b", 3)).toBe("a😀");
    expect(sliceCodePoints("😀", 1)).toBe("");
    expect(sliceCodePoints("abc", 0)).toBe("");
    expect(sliceCodePoints("abc", -2)).toBe("");
  });

  it("never leaves a lone surrogate at any cut of emoji-rich text", () => {
    const text = "x😀é👍🏽y🇫🇷z".repeat(3);
    for (let length = 0; length <= text.length; length++) {
      const cut = sliceCodePoints(text, length);
      expect(cut.isWellFormed()).toBe(true);
      expect(length - cut.length).toBeLessThanOrEqual(1);
    }
  });
});

describe("truncateText", () => {
  it("appends the marker within the length, only when it cut", () => {
    expect(truncateText("hello", 5)).toBe("hello");
    expect(truncateText("hello world", 6)).toBe("hello…");
    expect(truncateText("hello world", 8, " [cut]")).toBe("he [cut]");
  });

  it("does not split an emoji before the marker", () => {
    expect(truncateText("ab😀cd", 4)).toBe("ab…");
    expect(truncateText("ab😀cd", 5)).toBe("ab😀…");
  });
});
