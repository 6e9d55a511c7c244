import { z } from "zod";

/**
 * A leaf module (it imports nothing of agentloop): the asking tool, the host and the Agent Protocol
 * adapter all read it.
 *
 * A child's lease on its parent. A chat asked by `ask_agent` runs for a parent that waits for its
 * answer; should the parent's host die and nobody resume the parent (no journal, or no other
 * host), the child would run on for nobody. So the question carries {@link PARENT_LEASE_HEADER},
 * naming where the waiting parent renews its lease and for how long each renewal holds; the parent
 * publishes a renewal there every TTL/5 while it waits, and the child's host cancels the child once
 * a whole TTL passed without one. A question without the header (an older host, a person's
 * request) has no lease: nothing changes for it.
 */
export const PARENT_LEASE_HEADER = "Agentloop-Parent-Lease";

/** How long one renewal holds by default: the child stops about this long after its parent did. */
export const DEFAULT_PARENT_LEASE_MS = 30_000;
export const MIN_PARENT_LEASE_MS = 1_000;
export const MAX_PARENT_LEASE_MS = 60 * 60 * 1000;

/** Renewals per TTL: one lost or late renewal does not end a lease. */
const RENEWALS_PER_TTL = 5;

/** A NATS subject to publish on: dot-separated tokens, no wildcards, no whitespace. */
const PUBLISH_SUBJECT = /^[^\s.*>]+(\.[^\s.*>]+)*$/;

/** What the lease needs of the bus: publishing renewals, subscribing to them. */
export interface LeaseBus {
  publish(subject: string, data: string): void;
  subscribe(subject: string, handler: (message: { data: string }) => void): { unsubscribe(): void };
}

/** The header's value: where the parent renews, and how long each renewal holds. */
export const ParentLease = z.object({
  subject: z.string().max(512).regex(PUBLISH_SUBJECT, { error: "a NATS subject without wildcards" }),
  ttlMs: z.number().int().min(MIN_PARENT_LEASE_MS).max(MAX_PARENT_LEASE_MS),
});
export type ParentLease = z.infer<typeof ParentLease>;

/** A renewal: the waiting call it is for (a session may wait on several children at once). */
export const ParentLeaseRenewal = z.object({ chatId: z.string(), toolCallId: z.string() });

/** `<prefix>.sessions.<agent>.<session>.waiting`: where a session waiting on asked chats renews its leases. */
export function parentWaitingSubject(prefix: string, agent: string, session: string): string {
  return `${prefix}.sessions.${agent}.${session}.waiting`;
}

export function parentLeaseHeaders(lease: ParentLease): Record<string, string> {
  return { [PARENT_LEASE_HEADER]: JSON.stringify(lease) };
}

/**
 * The request's parent lease (names matched without regard to case), undefined without one; a
 * header that is not a valid lease is refused with this message, never guessed at.
 */
export function readParentLease(
  headers: Readonly<Record<string, string>> | undefined,
): { ok: true; lease: ParentLease | undefined } | { ok: false; message: string } {
  const name = PARENT_LEASE_HEADER.toLowerCase();
  const raw = Object.entries(headers ?? {}).find(([key]) => key.toLowerCase() === name)?.[1];
  if (raw === undefined) return { ok: true, lease: undefined };
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    return { ok: false, message: `header ${PARENT_LEASE_HEADER}: not JSON` };
  }
  const parsed = ParentLease.safeParse(value);
  if (parsed.success) return { ok: true, lease: parsed.data };
  return {
    ok: false,
    message: `header ${PARENT_LEASE_HEADER}: want {"subject": a subject, "ttlMs": ${MIN_PARENT_LEASE_MS} to ${MAX_PARENT_LEASE_MS}}`,
  };
}

/**
 * The parent's side: renews the lease of the call `toolCallId` of chat `chatId` on `lease.subject`
 * at once and every TTL/5 until the returned function is called (the answer came, or the call was
 * cancelled: then the child is stopped anyway). Best-effort: a renewal the bus refuses is skipped.
 */
export function renewParentLease(
  bus: LeaseBus,
  lease: ParentLease,
  waiting: { chatId: string; toolCallId: string },
): () => void {
  const renewal = JSON.stringify(waiting);
  const renew = (): void => {
    try {
      bus.publish(lease.subject, renewal);
    } catch {
      // The bus is closing: the lease runs out, as it should for a parent that is going away.
    }
  };
  renew();
  const timer = setInterval(renew, Math.max(1, Math.floor(lease.ttlMs / RENEWALS_PER_TTL)));
  timer.unref?.();
  return () => clearInterval(timer);
}
