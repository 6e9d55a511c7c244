import { AgentloopError } from "./agentloop-error.js";

/**
 * A request named an agent this host does not serve. Replies say `unknown_agent`, as the contract
 * does for a chat sent to such a name; asking again gets the same answer until the agent is added.
 */
export class UnknownAgentError extends AgentloopError {
  readonly code = "unknown_agent";
  readonly retryable = false;
  /** The name that was asked for. */
  readonly agent: string;

  constructor(agent: string, served?: readonly string[]) {
    const serving = served === undefined ? "" : ` (this host serves: ${served.join(", ")})`;
    super(`no agent named "${agent}"${serving}`);
    this.agent = agent;
  }
}
