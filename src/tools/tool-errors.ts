import { AgentloopError } from "../errors/agentloop-error.js";

/**
 * Errors of the tool layer. A tool error does not fail the chat: the runner turns it into an
 * `{"error": …}` result the model sees, so messages are written for the model to read. The one
 * exception is an error made with `failsChat` (see {@link ToolErrorOptions.failsChat}).
 */

export interface ToolErrorOptions {
  /** The tool the error is about, when known. */
  toolName?: string;
  cause?: unknown;
  /**
   * The chat fails with this error (its `ChatFailed` carries it) instead of handing it to the
   * model: for a failure the agent was configured not to handle itself (an asked agent failing
   * under the `fail` supervision policy). Default false.
   */
  failsChat?: boolean;
}

/** Base of every tool error. */
export class ToolError extends AgentloopError {
  readonly code:
    | "tool"
    | "tool_not_found"
    | "tool_arguments"
    | "tool_cancelled"
    | "mcp_server_not_running"
    | "mcp_tool_call"
    | AgentCallErrorCode = "tool";
  readonly retryable = false;
  readonly toolName: string | undefined;
  /** See {@link ToolErrorOptions.failsChat}. */
  readonly failsChat: boolean;

  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.toolName = options.toolName;
    this.failsChat = options.failsChat ?? false;
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

/** Why asking another agent (`ask_agent`) failed, as the model reads it in the result's `code`. */
export type AgentCallErrorCode = "cycle" | "depth_exceeded" | "unavailable" | "denied" | "agent_failed";

/**
 * Asking another agent failed in a way the model can act on: the asked session already waits
 * higher up the chain (`cycle`), the chain is at its depth cap (`depth_exceeded`), the agent is not
 * there or did not answer (`unavailable`), the question or the asked agent's call was refused
 * (`denied`), or the asked agent's chat failed (`agent_failed`). Its result is
 * `{"error": message, "code": code}`.
 */
export class AgentCallError extends ToolError {
  override readonly code: AgentCallErrorCode;
  constructor(code: AgentCallErrorCode, message: string, options: ToolErrorOptions = {}) {
    super(message, options);
    this.code = code;
  }
}
