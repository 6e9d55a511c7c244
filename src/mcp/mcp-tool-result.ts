/**
 * What an MCP `tools/call` result becomes for the loop: one text for the tool result, the images
 * to show the model after it, and whether the tool reported an error.
 *
 * @see https://modelcontextprotocol.io/specification/2025-06-18/server/tools#tool-result
 */
export interface McpToolOutput {
  text: string;
  images: Array<{ mediaType: string; data: string }>;
  isError: boolean;
}

/** The fields of a `CallToolResult` this reads (the SDK's type stays in the connection). */
export interface McpCallResult {
  content?: readonly unknown[];
  structuredContent?: unknown;
  isError?: boolean;
  /** Servers of protocol 2024-10-07 answer with this instead of `content`. */
  toolResult?: unknown;
}

type Part = Record<string, unknown> & { type?: unknown };

/**
 * Text parts are joined as they are; other parts are summarised in one bracketed line each (an
 * image is also returned to be attached, embedded text resources keep their text). A result with no
 * content at all falls back to its structured content as JSON.
 */
export function toMcpToolOutput(result: McpCallResult): McpToolOutput {
  const images: McpToolOutput["images"] = [];
  const lines: string[] = [];
  for (const part of (result.content ?? []) as Part[]) {
    lines.push(describePart(part, images));
  }
  let text = lines.join("\n");
  if (lines.length === 0) {
    const fallback = result.structuredContent ?? result.toolResult;
    text = fallback === undefined ? "" : JSON.stringify(fallback);
  }
  return { text, images, isError: result.isError === true };
}

function describePart(part: Part, images: McpToolOutput["images"]): string {
  switch (part.type) {
    case "text":
      return String(part.text ?? "");
    case "image": {
      const mediaType = String(part.mimeType ?? "image/png");
      const data = String(part.data ?? "");
      images.push({ mediaType, data });
      return `[image: ${mediaType}, ${formatBytes(base64Bytes(data))}, attached below]`;
    }
    case "audio":
      return `[audio: ${String(part.mimeType ?? "audio")}, ${formatBytes(base64Bytes(String(part.data ?? "")))}, not shown]`;
    case "resource": {
      const resource = (part.resource ?? {}) as Part;
      const uri = String(resource.uri ?? "");
      const mime = resource.mimeType === undefined ? "" : ` (${String(resource.mimeType)})`;
      if (typeof resource.text === "string") return `[resource ${uri}${mime}]\n${resource.text}`;
      return `[resource ${uri}${mime}: ${formatBytes(base64Bytes(String(resource.blob ?? "")))} of binary data, not shown]`;
    }
    case "resource_link": {
      const mime = part.mimeType === undefined ? "" : ` (${String(part.mimeType)})`;
      const about = typeof part.description === "string" ? `: ${part.description}` : "";
      return `[resource link ${String(part.name ?? "")} ${String(part.uri ?? "")}${mime}${about}]`;
    }
    default:
      return `[${String(part.type ?? "unknown")} content, not shown]`;
  }
}

function base64Bytes(data: string): number {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}

function formatBytes(bytes: number): string {
  return `${String(bytes).replace(/\B(?=(\d{3})+(?!\d))/g, ",")} bytes`;
}
