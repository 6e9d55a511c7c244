import { ToolError } from "../tools/tool-errors.js";

/** A call reached an MCP server that is down (crashed, not started yet, or the host is stopping). */
export class McpServerNotRunningError extends ToolError {
  override readonly code = "mcp_server_not_running";
  readonly server: string;
  readonly reason: string;

  constructor(server: string, reason: string, options: { toolName?: string; cause?: unknown } = {}) {
    super(`MCP server ${server} is not running: ${reason}`, options);
    this.server = server;
    this.reason = reason;
  }
}

/** The server answered a call with an error: the tool's own (`isError`) or a protocol error. */
export class McpToolCallError extends ToolError {
  override readonly code = "mcp_tool_call";
  readonly server: string;

  constructor(server: string, message: string, options: { toolName?: string; cause?: unknown } = {}) {
    super(message, options);
    this.server = server;
  }
}
