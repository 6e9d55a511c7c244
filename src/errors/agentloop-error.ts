import type { AgentloopErrorCode } from "./error-code.js";

/** What every {@link AgentloopError} may be given besides its message. */
export interface AgentloopErrorOptions {
  cause?: unknown;
  /** An HTTP status: the one a provider answered with, or the one a web request is refused with. */
  status?: number;
}

/**
 * Base of every error agentloop throws. `code` is stable (callers and the contract tables switch
 * on it, never on class names), `retryable` says whether trying the same thing again may work,
 * `status` is an HTTP status when there was one (a provider's answer, a refused web request's), and `cause` keeps the underlying error.
 * `name` is the concrete class name. Each subclass fixes its `code`; the table in error-code.ts
 * says what that code becomes in a NATS reply, a CLI exit code and an event.
 */
export abstract class AgentloopError extends Error {
  abstract readonly code: AgentloopErrorCode;
  abstract readonly retryable: boolean;
  readonly status: number | undefined;

  constructor(message: string, options: AgentloopErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.status = options.status;
  }
}

/**
 * True for every error of the hierarchy.
 *
 * @example
 * ```ts
 * import type { Agent } from "agentloop";
 * import { isAgentloopError } from "agentloop/errors";
 *
 * declare const agent: Agent;
 * try {
 *   await agent.chat("hi");
 * } catch (error) {
 *   if (isAgentloopError(error)) console.error(`${error.code} (retryable: ${error.retryable}): ${error.message}`);
 *   else throw error;
 * }
 * ```
 */
export function isAgentloopError(error: unknown): error is AgentloopError {
  return error instanceof AgentloopError;
}
