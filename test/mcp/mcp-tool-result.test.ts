import { describe, expect, it } from "vitest";
import { toMcpToolOutput } from "../../src/mcp/mcp-tool-result.js";

describe("toMcpToolOutput", () => {
  it("joins text parts and summarises the others; images are kept to be attached", () => {
    const output = toMcpToolOutput({
      content: [
        { type: "text", text: "first" },
        { type: "image", mimeType: "image/png", data: "AAAA" },
        { type: "audio", mimeType: "audio/wav", data: "AAAAAA==" },
        { type: "resource", resource: { uri: "file:///a.txt", mimeType: "text/plain", text: "inside" } },
        { type: "resource", resource: { uri: "file:///b.bin", blob: "AAAA" } },
        { type: "resource_link", name: "c", uri: "file:///c", description: "a link" },
      ],
    });
    expect(output.text).toBe(
      [
        "first",
        "[image: image/png, 3 bytes, attached below]",
        "[audio: audio/wav, 4 bytes, not shown]",
        "[resource file:///a.txt (text/plain)]\ninside",
        "[resource file:///b.bin: 3 bytes of binary data, not shown]",
        "[resource link c file:///c: a link]",
      ].join("\n"),
    );
    expect(output.images).toEqual([{ mediaType: "image/png", data: "AAAA" }]);
    expect(output.isError).toBe(false);
  });

  it("falls back to structured content, and reports isError", () => {
    expect(toMcpToolOutput({ content: [], structuredContent: { sum: 3 } }).text).toBe('{"sum":3}');
    expect(toMcpToolOutput({ content: [{ type: "text", text: "no such file" }], isError: true })).toEqual({
      text: "no such file",
      images: [],
      isError: true,
    });
  });
});
