import { AgentloopError, type AgentloopErrorOptions } from "./agentloop-error.js";

/**
 * A store agentloop depends on (JetStream) did not answer in time, even after retries: nothing is
 * known to be lost and the same request may work a moment later. Replies say `unavailable`.
 */
export class UnavailableError extends AgentloopError {
  readonly code = "unavailable";
  readonly retryable = true;

  constructor(message: string, options: AgentloopErrorOptions = {}) {
    super(message, options);
  }
}
