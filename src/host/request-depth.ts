import { z } from "zod";

/**
 * Nesting depth of agent-to-agent calls (`ask_agent`), carried as an optional `depth` field of the
 * chat request. The contract's schema ignores unknown fields, so the host reads it on its own.
 */
export const MAX_REQUEST_DEPTH = 64;

export const RequestDepth = z.number().int().min(0).max(MAX_REQUEST_DEPTH).optional();

/** The request's `depth` (0 when absent), or a `bad_request` when it is not a small non-negative integer. */
export function readRequestDepth(
  data: string,
): { ok: true; value: number } | { ok: false; error: { code: "bad_request"; message: string } } {
  let depth: unknown;
  try {
    depth = (JSON.parse(data) as { depth?: unknown }).depth;
  } catch {
    return { ok: false, error: { code: "bad_request", message: "chat request is not valid JSON" } };
  }
  const parsed = RequestDepth.safeParse(depth);
  if (parsed.success) return { ok: true, value: parsed.data ?? 0 };
  return {
    ok: false,
    error: {
      code: "bad_request",
      message: `chat request: field "depth": must be an integer from 0 to ${MAX_REQUEST_DEPTH}`,
    },
  };
}
