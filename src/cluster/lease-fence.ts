import type { ContextHistory } from "../context/context-history.js";
import { AgentloopError } from "../errors/agentloop-error.js";
import type { LlmClient } from "../llm/llm-client.js";
import type { GenerateRequest } from "../llm/types.js";

/**
 * What a session checks before it acts on shared state (a history write, a model request): that
 * this host still holds the session's lease. `assertHeld()` is synchronous and cheap (a clock read),
 * so it runs right before the write; with SQLite the write follows in the same tick.
 */
export interface LeaseFence {
  /** The epoch of the lease the session runs under. */
  readonly epoch: number;
  /** @throws LeaseLostError once the lease is lost or past its local deadline. */
  assertHeld(): void;
}

/** The session's lease is gone (expired locally, taken over, released): it must not write. */
export class LeaseLostError extends AgentloopError {
  readonly code = "lease_lost";
  /** Asking again reaches the host that serves the session now. */
  readonly retryable = true;
  readonly epoch: number;

  constructor(message: string, epoch: number) {
    super(message);
    this.epoch = epoch;
  }
}

/** The history, refusing every write once the fence says the lease is gone. Reads pass. */
export function fenceHistory(history: ContextHistory, fence: LeaseFence | undefined): ContextHistory {
  if (fence === undefined) return history;
  const guarded = <A extends unknown[], R>(write: ((...args: A) => Promise<R>) | undefined) =>
    write === undefined
      ? undefined
      : async (...args: A): Promise<R> => {
          fence.assertHeld();
          return write(...args);
        };
  const fenced: ContextHistory = {
    restore: () => history.restore(),
    append: guarded(history.append.bind(history))!,
    replace: guarded(history.replace.bind(history))!,
    clear: guarded(history.clear.bind(history))!,
  };
  if (history.loadSeq) fenced.loadSeq = history.loadSeq.bind(history);
  if (history.loadPendingApproval) fenced.loadPendingApproval = history.loadPendingApproval.bind(history);
  const saveSeq = guarded(history.saveSeq?.bind(history));
  if (saveSeq) fenced.saveSeq = saveSeq;
  const savePending = guarded(history.savePendingApproval?.bind(history));
  if (savePending) fenced.savePendingApproval = savePending;
  const takePending = guarded(history.takePendingApproval?.bind(history));
  if (takePending) fenced.takePendingApproval = takePending;
  return fenced;
}

/**
 * The model client, refusing to start a request, and every retry of one, once the lease is gone: a
 * host resumed after a pause (or that lost the session during a backoff) must not send one more
 * request of a session another host now runs. The check before each retry rides on the request's
 * `beforeAttempt`, which the retrying client calls; the check before the call also fences a client
 * that does not.
 */
export function fenceLlm(llm: LlmClient, fence: LeaseFence | undefined): LlmClient {
  if (fence === undefined) return llm;
  const fenced = (request: GenerateRequest): GenerateRequest => {
    const before = request.beforeAttempt;
    return {
      ...request,
      beforeAttempt: () => {
        fence.assertHeld();
        before?.();
      },
    };
  };
  return {
    get backend() {
      return llm.backend;
    },
    setBackend: (backend) => llm.setBackend(backend),
    generate: async (request) => {
      fence.assertHeld();
      return llm.generate(fenced(request));
    },
    generateStream: async (request, sink) => {
      fence.assertHeld();
      return llm.generateStream(fenced(request), sink);
    },
  };
}
