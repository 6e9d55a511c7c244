import { z } from "zod";

/** A decision already taken about one held call (a batch is decided call by call). */
export const ApprovalDecision = z.object({ approved: z.boolean(), reason: z.string().optional() });
export type ApprovalDecision = z.infer<typeof ApprovalDecision>;

/** One call held for approval, with the exact arguments the approval binds to. */
export const HeldToolCall = z.object({
  toolCallId: z.string().min(1),
  toolName: z.string().min(1),
  arguments: z.string(),
  decision: ApprovalDecision.optional(),
});
export type HeldToolCall = z.infer<typeof HeldToolCall>;

/**
 * A chat stopped in `awaitingApproval`, persisted with its session so it survives passivation
 * and a host restart: the chat actor's persisted snapshot (XState `getPersistedSnapshot`: the
 * conversation, the assistant message and its calls), the chat's id (its events go on under it)
 * and the held calls. Used once: taken (deleted) when the last call is decided or the chat ends.
 */
export const PendingApproval = z.object({
  chatId: z.string(),
  iteration: z.number().int().nonnegative(),
  calls: z.array(HeldToolCall).min(1),
  snapshot: z.record(z.string(), z.unknown()),
  /**
   * The client's request id of the chat (`id` of its chat request), when it had one: a retry of
   * that id, after the host died, waits for this chat's answer instead of being refused.
   */
  requestId: z.string().optional(),
  /** Tools the session's callers need approval for (see `ToolContext.approvalRequired`). */
  approvalRequired: z.array(z.string()).optional(),
});
export type PendingApproval = z.infer<typeof PendingApproval>;
