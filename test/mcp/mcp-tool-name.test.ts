import { describe, expect, it } from "vitest";
import { mcpToolName } from "../../src/mcp/mcp-tool-name.js";

describe("mcpToolName", () => {
  it("is <server>__<tool> when providers accept that", () => {
    expect(mcpToolName("fs", "read_text_file")).toBe("fs__read_text_file");
    expect(mcpToolName("everything", "get-env")).toBe("everything__get-env");
  });

  it("makes names providers refuse fit, deterministically and without collisions", () => {
    const long = mcpToolName("github", `create_${"very_".repeat(20)}long_tool`);
    expect(long).toMatch(/^github__create_very_[A-Za-z0-9_-]*_[0-9a-f]{8}$/);
    expect(long).toHaveLength(64);
    expect(mcpToolName("github", `create_${"very_".repeat(20)}long_tool`)).toBe(long);
    expect(mcpToolName("github", `create_${"very_".repeat(20)}long_tool2`)).not.toBe(long);

    const dotted = mcpToolName("docs", "search.v2");
    expect(dotted).toMatch(/^docs__search_v2_[0-9a-f]{8}$/);
    expect(mcpToolName("docs", "search_v2")).toBe("docs__search_v2");
  });
});
