import { AgentloopError } from "../errors/agentloop-error.js";

/**
 * A user's mistake in what they configured (a command-line flag, an environment variable, an
 * option of `startHost`): the CLI prints it as one line and exits with code 2.
 */
export class UsageError extends AgentloopError {
  readonly code = "usage";
  readonly retryable = false;
}
