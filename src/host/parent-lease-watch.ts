import { type LeaseBus, type ParentLease, ParentLeaseRenewal } from "../contract/parent-lease.js";
import { AgentloopError } from "../errors/agentloop-error.js";

/** Why a chat was cancelled when its parent's lease ran out: nobody waits for its answer any more. */
export class ParentLeaseLapsedError extends AgentloopError {
  readonly code = "cancelled";
  readonly retryable = false;
}

/**
 * The child's side: listens for the renewals of the parent call `parent` on `lease.subject`;
 * `signal` aborts once `lease.ttlMs` passed without one, its reason naming the parent. The lease
 * starts with the first renewal heard: a host whose NATS user may not subscribe there (a
 * permissions file from before leases) hears none, and its asked chats run as they did before
 * instead of all being cancelled after one TTL. `close()` when the chat is over.
 */
export function watchParentLease(
  bus: LeaseBus,
  lease: ParentLease,
  parent: { agent: string; session: string; chatId: string; toolCallId: string },
): { signal: AbortSignal; close(): void } {
  const controller = new AbortController();
  const expire = (): void => {
    subscription.unsubscribe();
    const seconds = Math.round(lease.ttlMs / 100) / 10;
    controller.abort(
      new ParentLeaseLapsedError(
        `its asker ${parent.agent}/${parent.session} stopped renewing its lease (nothing for ${seconds} s): nobody waits for this answer any more`,
      ),
    );
  };
  let timer: NodeJS.Timeout | undefined;
  const subscription = bus.subscribe(lease.subject, (message) => {
    let renewal: unknown;
    try {
      renewal = JSON.parse(message.data);
    } catch {
      return;
    }
    const parsed = ParentLeaseRenewal.safeParse(renewal);
    if (!parsed.success || controller.signal.aborted) return;
    if (parsed.data.chatId !== parent.chatId || parsed.data.toolCallId !== parent.toolCallId) return;
    clearTimeout(timer);
    timer = setTimeout(expire, lease.ttlMs);
  });
  return {
    signal: controller.signal,
    close() {
      clearTimeout(timer);
      subscription.unsubscribe();
    },
  };
}
