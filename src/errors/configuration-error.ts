import { AgentloopError } from "./agentloop-error.js";

/**
 * A mistake in the user's configuration (an unknown provider, a missing API key, a bad flag or
 * file). Not an LLM error: nothing was sent, nothing should be retried, and the CLI prints its
 * one-line message (exit code 2) instead of a stack trace. Host, tools and CLI throw it alike.
 */
export class ConfigurationError extends AgentloopError {
  readonly code = "configuration";
  readonly retryable = false;

  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
  }
}
