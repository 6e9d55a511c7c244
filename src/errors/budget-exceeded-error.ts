import { AgentloopError } from "./agentloop-error.js";

/**
 * A chat refused because its tenant's token budget for the period is spent (the agents file's
 * `tenants.<tenant>.tokenBudget`). No model request was made and nothing was stored; trying again
 * within the same period gets the same answer.
 */
export class BudgetExceededError extends AgentloopError {
  readonly code = "budget_exceeded";
  readonly retryable = false;
}
