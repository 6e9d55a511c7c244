import { describeError } from "../errors/describe-error.js";
import type { ContentPart, ToolCall, ToolDefinition } from "../llm/types.js";
import { ToolArgumentsError, ToolNotFoundError } from "../tools/tool-errors.js";
import type { ToolContext, ToolSet } from "../tools/tool-set.js";
import { McpToolCallError } from "./mcp-errors.js";
import type { McpServerConnection, McpTool } from "./mcp-server-connection.js";
import { mcpToolName } from "./mcp-tool-name.js";
import { toMcpToolOutput } from "./mcp-tool-result.js";

/**
 * The tools of one MCP server as a ToolSet, named `<server>__<tool>`. A view over the host's shared
 * connection: it holds no state, so every session uses the same instance, and it always shows the
 * server's latest tool list (kept while the server is down, so a call gets "not running" rather
 * than "tool not found").
 */
export function createMcpToolSet(connection: McpServerConnection): ToolSet {
  return new McpToolSet(connection);
}

class McpToolSet implements ToolSet {
  readonly name: string;
  readonly #connection: McpServerConnection;
  #listed: readonly McpTool[] | undefined;
  #definitions: ToolDefinition[] = [];
  /** Namespaced name → the server's own name. */
  #byName = new Map<string, string>();
  /** Namespaced names of the tools the server annotates `idempotentHint`. */
  #idempotent = new Set<string>();

  constructor(connection: McpServerConnection) {
    this.#connection = connection;
    this.name = `mcp:${connection.name}`;
  }

  tools(): ToolDefinition[] {
    this.#refresh();
    return this.#definitions;
  }

  async invoke(call: ToolCall, context: ToolContext): Promise<string> {
    this.#refresh();
    const tool = this.#byName.get(call.name);
    if (tool === undefined) throw new ToolNotFoundError(call.name);
    const args = parseArguments(call);
    const result = await this.#connection.callTool(tool, args, context.signal);
    const output = toMcpToolOutput(result);
    if (output.isError) {
      throw new McpToolCallError(
        this.#connection.name,
        output.text === "" ? "the tool failed" : output.text,
        {
          toolName: call.name,
        },
      );
    }
    if (output.images.length > 0) {
      // Tool results are text only (every provider takes text results): the images follow them, as the model's input.
      const images: ContentPart[] = output.images.map((image) => ({
        type: "image",
        mediaType: image.mediaType,
        data: image.data,
      }));
      context.appendMessage({
        role: "user",
        content: [{ type: "text", text: `The image(s) returned by ${call.name}:` }, ...images],
      });
    }
    return output.text;
  }

  /** The server's `idempotentHint`; without it a call is not run again after a host stopped mid-call. */
  isIdempotent(call: ToolCall): boolean {
    this.#refresh();
    return this.#idempotent.has(call.name);
  }

  prompt(): string {
    return "";
  }

  iterationPromptInjection(): string {
    return "";
  }

  copy(): ToolSet {
    return this;
  }

  reset(): void {}

  #refresh(): void {
    const tools = this.#connection.tools;
    if (tools === this.#listed) return;
    this.#listed = tools;
    this.#byName = new Map();
    this.#idempotent = new Set();
    this.#definitions = [];
    for (const tool of tools) {
      const name = mcpToolName(this.#connection.name, tool.name);
      if (this.#byName.has(name)) continue;
      this.#byName.set(name, tool.name);
      if (tool.idempotent) this.#idempotent.add(name);
      this.#definitions.push({ name, description: tool.description, parameters: tool.inputSchema });
    }
  }
}

function parseArguments(call: ToolCall): Record<string, unknown> {
  if (call.arguments.trim() === "") return {};
  let value: unknown;
  try {
    value = JSON.parse(call.arguments);
  } catch (error) {
    const reason = describeError(error);
    throw new ToolArgumentsError(`arguments for tool "${call.name}" are not valid JSON: ${reason}`, {
      toolName: call.name,
      cause: error,
    });
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ToolArgumentsError(`arguments for tool "${call.name}" must be a JSON object`, {
      toolName: call.name,
    });
  }
  return value as Record<string, unknown>;
}
