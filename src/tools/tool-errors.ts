import { AgentloopError } from "../errors/agentloop-error.js";

/**
 * Errors of the tool layer. A tool error never fails the chat: the runner turns it into an
 * `{"error": …}` result the model sees, so messages are written for the model to read.
 */

export interface ToolErrorOptions {
  /** The tool the error is about, when known. */
  toolName?: string;
  cause?: unknown;
}

/** Base of every tool error. */
export class ToolError extends AgentloopError {
  readonly code:
    | "tool"
    | "tool_not_found"
    | "tool_arguments"
    | "tool_cancelled"
    | "mcp_server_not_running"
    | "mcp_tool_call" = "tool";
  readonly retryable = false;
  readonly toolName: string | undefined;

  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.toolName = options.toolName;
  }
}

/** The model called a tool that no ToolSet offers. */
export class ToolNotFoundError extends ToolError {
  override readonly code = "tool_not_found";
  constructor(toolName: string) {
    super(`tool not found: ${toolName}`, { toolName });
  }
}

/** The arguments were not valid JSON or did not match the tool's schema. */
export class ToolArgumentsError extends ToolError {
  override readonly code = "tool_arguments";
  /** One readable line per schema issue (empty for a JSON syntax error). */
  readonly issues: readonly string[];

  constructor(message: string, options: ToolErrorOptions & { issues?: readonly string[] } = {}) {
    super(message, options);
    this.issues = options.issues ?? [];
  }
}

/** The chat was cancelled before or while the tool ran. */
export class ToolCancelledError extends ToolError {
  override readonly code = "tool_cancelled";
  constructor(toolName?: string) {
    super("cancelled", toolName === undefined ? {} : { toolName });
  }
}
