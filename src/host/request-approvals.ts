import { z } from "zod";

/** The most tool names a chat request's `approvalRequired` may list. */
export const MAX_APPROVAL_REQUIRED = 256;

/**
 * The tools an asking agent needs approval for (`ask_agent`), carried as an optional
 * `approvalRequired` field of the chat request: the asked session's calls to them need approval
 * too. Like `depth`, the contract's schema ignores unknown fields, so the host reads it on its own.
 */
export const RequestApprovals = z
  .array(z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/))
  .max(MAX_APPROVAL_REQUIRED)
  .optional();

/** The request's `approvalRequired` ([] when absent), or a `bad_request` saying what is wrong with it. */
export function readRequestApprovals(
  data: string,
): { ok: true; value: string[] } | { ok: false; error: { code: "bad_request"; message: string } } {
  let field: unknown;
  try {
    field = (JSON.parse(data) as { approvalRequired?: unknown }).approvalRequired;
  } catch {
    return { ok: false, error: { code: "bad_request", message: "chat request is not valid JSON" } };
  }
  const parsed = RequestApprovals.safeParse(field);
  if (parsed.success) return { ok: true, value: parsed.data ?? [] };
  return {
    ok: false,
    error: {
      code: "bad_request",
      message: `chat request: field "approvalRequired": must be a list of at most ${MAX_APPROVAL_REQUIRED} tool names`,
    },
  };
}
