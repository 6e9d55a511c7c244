import { AgentloopError, type AgentloopErrorOptions } from "./agentloop-error.js";

/**
 * A request from a caller the bus let in but whom the rule it names does not allow to do this:
 * the sender of an Agent Protocol prompt answering its own chat's approval query, for one.
 * Asking again changes nothing; someone else (an approver) has to do it.
 */
export class ForbiddenError extends AgentloopError {
  readonly code = "forbidden";
  readonly retryable = false;
  /** The rule the request broke, as the refusal's log line names it (e.g. `self-approval`). */
  readonly rule: string;

  constructor(message: string, rule: string, options: AgentloopErrorOptions = {}) {
    super(message, options);
    this.rule = rule;
  }
}
