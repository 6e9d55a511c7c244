import { createHash } from "node:crypto";

/** What every provider accepts as a tool name (OpenAI and Anthropic cap it at 64 characters). */
const PROVIDER_TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_LENGTH = 64;
const HASH_LENGTH = 8;

/**
 * The name the model sees for an MCP server's tool: `<server>__<tool>`. MCP allows tool names that
 * providers refuse (dots, slashes, more than 64 characters): those become the allowed characters
 * cut to fit plus `_` and 8 hex digits of a hash of the full name, so the same tool always gets the
 * same name and two tools that differ only in the cut part still differ.
 */
export function mcpToolName(server: string, tool: string): string {
  const name = `${server}__${tool}`;
  if (PROVIDER_TOOL_NAME.test(name)) return name;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, HASH_LENGTH);
  const readable = name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, MAX_LENGTH - HASH_LENGTH - 1);
  return `${readable}_${hash}`;
}
