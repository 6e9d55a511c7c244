/**
 * Errors of the tool layer. A tool error never fails the chat: the runner turns it into an
 * `{"error": …}` result the model sees (SPEC §6.2), so messages are written for the model to read.
 */

export interface ToolErrorOptions {
  /** The tool the error is about, when known. */
  toolName?: string;
  cause?: unknown;
}

/** Base of every tool error. `name` is the concrete class name. */
export class ToolError extends Error {
  readonly toolName: string | undefined;

  constructor(message: string, options: ToolErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.toolName = options.toolName;
  }
}

/** The model called a tool that no ToolSet offers. */
export class ToolNotFoundError extends ToolError {
  constructor(toolName: string) {
    super(`tool not found: ${toolName}`, { toolName });
  }
}

/** The arguments were not valid JSON or did not match the tool's schema. */
export class ToolArgumentsError extends ToolError {
  /** One readable line per schema issue (empty for a JSON syntax error). */
  readonly issues: readonly string[];

  constructor(message: string, options: ToolErrorOptions & { issues?: readonly string[] } = {}) {
    super(message, options);
    this.issues = options.issues ?? [];
  }
}

/** The chat was cancelled before or while the tool ran. */
export class ToolCancelledError extends ToolError {
  constructor(toolName?: string) {
    super("cancelled", toolName === undefined ? {} : { toolName });
  }
}
