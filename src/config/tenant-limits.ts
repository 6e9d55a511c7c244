import { readFile } from "node:fs/promises";
import { z } from "zod";
import { NAME_PATTERN } from "../bus/subjects.js";

/** The lengths of a token budget's period. */
export const BUDGET_PERIODS = { minute: 60_000, hour: 3_600_000, day: 86_400_000 } as const;

/** `{ "tokens": 100000, "per": "day" }`: at most `tokens` model tokens (prompt + completion) per period. */
export const TokenBudgetLimit = z
  .object({
    tokens: z.number().int().positive(),
    per: z.enum(Object.keys(BUDGET_PERIODS) as [keyof typeof BUDGET_PERIODS]),
  })
  .strict();
export type TokenBudgetLimit = z.infer<typeof TokenBudgetLimit>;

/** One tenant's limits in the agents file's `tenants` section. */
export const TenantLimits = z
  .object({
    /** Live sessions of the tenant on one host; past it a new session is answered `overloaded`. */
    maxSessions: z.number().int().min(1).optional(),
    /** Tokens per period on one host; past it a chat is answered `budget_exceeded` before any model request. */
    tokenBudget: TokenBudgetLimit.optional(),
  })
  .strict();
export type TenantLimits = z.infer<typeof TenantLimits>;

/**
 * The agents file's `tenants` section: limits by tenant name. It does not list who is served (every
 * tenant whose account imports the hosts' subjects is); a tenant not named here has no limits.
 */
export const TenantsSection = z.record(
  z.string().regex(NAME_PATTERN, { error: `a tenant name must match ${NAME_PATTERN.source}` }),
  TenantLimits,
);
export type TenantsSection = z.infer<typeof TenantsSection>;

/**
 * The `tenants` section of an agents file already validated (by the agents' loader); `{}` when it
 * has none.
 */
export async function readTenantLimits(path: string): Promise<TenantsSection> {
  const json = JSON.parse(await readFile(path, "utf8")) as { tenants?: unknown };
  return json.tenants === undefined ? {} : TenantsSection.parse(json.tenants);
}
