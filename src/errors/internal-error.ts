import { AgentloopError } from "./agentloop-error.js";

/**
 * A broken promise inside agentloop itself (a machine used without the implementation it needs,
 * an installation missing its own files): nothing the caller sent causes it and nothing the
 * caller changes fixes it. Replies say `internal`; the CLI exits 1.
 */
export class InternalError extends AgentloopError {
  readonly code = "internal";
  readonly retryable = false;
}
