import { BUDGET_PERIODS, type TokenBudgetLimit } from "../config/tenant-limits.js";
import type { AgentEvent } from "../events/types.js";

/** Whether a chat may start: what the chat machine's budget guard reads. */
export type BudgetCheck = { isExceeded: false } | { isExceeded: true; reason: string };

/**
 * One tenant's token budget on this host: the tokens of every model request (its `ModelResponse`
 * usage, prompt + completion) add up within a period (`minute`, `hour` or `day`, counted from the
 * epoch, so every host's periods start together) and start over with the next one. A chat that
 * starts with the period's budget spent is refused before any model request; a chat that started
 * within it runs to its end.
 */
export class TokenBudget {
  readonly tenant: string;
  readonly limit: TokenBudgetLimit;
  readonly #now: () => number;
  #period = -1;
  #used = 0;

  constructor(tenant: string, limit: TokenBudgetLimit, now: () => number = Date.now) {
    this.tenant = tenant;
    this.limit = limit;
    this.#now = now;
  }

  /** Tokens used in the current period. */
  get used(): number {
    this.#roll();
    return this.#used;
  }

  check(): BudgetCheck {
    if (this.used < this.limit.tokens) return { isExceeded: false };
    return {
      isExceeded: true,
      reason: `tenant "${this.tenant}" used its budget of ${this.limit.tokens} tokens per ${this.limit.per} (${this.#used} used); try again next ${this.limit.per}`,
    };
  }

  /** Counts a model request's tokens (any other event is ignored). */
  record(event: AgentEvent): void {
    if (event.kind !== "ModelResponse") return;
    this.#roll();
    this.#used += event.usage.prompt + event.usage.completion;
  }

  #roll(): void {
    const period = Math.floor(this.#now() / BUDGET_PERIODS[this.limit.per]);
    if (period === this.#period) return;
    this.#period = period;
    this.#used = 0;
  }
}
