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

/**
 * Why a background task's signal aborted (its `signal.reason`): `cancel(id)` stopped it, or the
 * session was reset and every task went with it. Work that rethrows its signal's reason reports
 * this message as its output.
 */
export class BackgroundTaskCancelledError extends ToolError {
  override readonly code = "tool_cancelled";
  readonly taskId: string;
  /** `cancelled`: stopped by its id; `reset`: dropped with its session. */
  readonly reason: "cancelled" | "reset";

  constructor(taskId: string, reason: "cancelled" | "reset") {
    super(reason === "cancelled" ? "the task was cancelled" : "the session was reset");
    this.taskId = taskId;
    this.reason = reason;
  }
}
