import type { ContextHistory } from "../context/context-history.js";
import type { PendingApproval } from "../context/pending-approval.js";
import { AgentloopError } from "../errors/agentloop-error.js";
import type { LlmClient } from "../llm/llm-client.js";
import type { GenerateRequest, GenerateResponse, LlmBackend, Message, StreamSink } from "../llm/types.js";

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

/**
 * The history, refusing every write once the fence says the lease is gone. Reads pass.
 *
 * A class rather than an object of closures: every live session holds one, and prototype methods
 * cost nothing per session (a wrapper of closures and bound methods was about 0.7 KB of heap each).
 */
class FencedHistory implements ContextHistory {
  readonly #history: ContextHistory;
  readonly #fence: LeaseFence;
  declare loadSeq?: () => Promise<number>;
  declare saveSeq?: (seq: number) => Promise<void>;
  declare loadPendingApproval?: () => Promise<PendingApproval | undefined>;
  declare savePendingApproval?: (pending: PendingApproval) => Promise<void>;
  declare takePendingApproval?: () => Promise<boolean>;

  constructor(history: ContextHistory, fence: LeaseFence) {
    this.#history = history;
    this.#fence = fence;
    // The optional parts exist exactly when the wrapped history has them (callers test for them).
    if (history.loadSeq) this.loadSeq = fencedLoadSeq;
    if (history.saveSeq) this.saveSeq = fencedSaveSeq;
    if (history.loadPendingApproval) this.loadPendingApproval = fencedLoadPendingApproval;
    if (history.savePendingApproval) this.savePendingApproval = fencedSavePendingApproval;
    if (history.takePendingApproval) this.takePendingApproval = fencedTakePendingApproval;
  }

  /** The wrapped history, once the fence allows a write (reads do not ask). */
  wrapped(isWrite: boolean): ContextHistory {
    if (isWrite) this.#fence.assertHeld();
    return this.#history;
  }

  restore(): Promise<Message[]> {
    return this.#history.restore();
  }

  async append(messages: readonly Message[]): Promise<void> {
    return this.wrapped(true).append(messages);
  }

  async replace(messages: readonly Message[]): Promise<void> {
    return this.wrapped(true).replace(messages);
  }

  async clear(): Promise<void> {
    return this.wrapped(true).clear();
  }
}

// Shared by every FencedHistory whose history has the part (assigned in its constructor).
function fencedLoadSeq(this: FencedHistory): Promise<number> {
  return this.wrapped(false).loadSeq!();
}
async function fencedSaveSeq(this: FencedHistory, seq: number): Promise<void> {
  return this.wrapped(true).saveSeq!(seq);
}
function fencedLoadPendingApproval(this: FencedHistory): Promise<PendingApproval | undefined> {
  return this.wrapped(false).loadPendingApproval!();
}
async function fencedSavePendingApproval(this: FencedHistory, pending: PendingApproval): Promise<void> {
  return this.wrapped(true).savePendingApproval!(pending);
}
async function fencedTakePendingApproval(this: FencedHistory): Promise<boolean> {
  return this.wrapped(true).takePendingApproval!();
}

/** The history, refusing every write once the fence says the lease is gone. Reads pass. */
export function fenceHistory(history: ContextHistory, fence: LeaseFence | undefined): ContextHistory {
  return fence === undefined ? history : new FencedHistory(history, fence);
}

/**
 * The model client, refusing to start a request, and every retry of one, once the lease is gone: a
 * host resumed after a pause (or that lost the session during a backoff) must not send one more
 * request of a session another host now runs. The check before each retry rides on the request's
 * `beforeAttempt`, which the retrying client calls; the check before the call also fences a client
 * that does not. A class for the same reason as {@link FencedHistory}.
 */
class FencedLlm implements LlmClient {
  readonly #llm: LlmClient;
  readonly #fence: LeaseFence;

  constructor(llm: LlmClient, fence: LeaseFence) {
    this.#llm = llm;
    this.#fence = fence;
  }

  get backend(): LlmBackend {
    return this.#llm.backend;
  }

  setBackend(backend: LlmBackend): void {
    this.#llm.setBackend(backend);
  }

  async generate(request: GenerateRequest): Promise<GenerateResponse> {
    this.#fence.assertHeld();
    return this.#llm.generate(this.#fenced(request));
  }

  async generateStream(request: GenerateRequest, sink: StreamSink): Promise<GenerateResponse> {
    this.#fence.assertHeld();
    return this.#llm.generateStream(this.#fenced(request), sink);
  }

  #fenced(request: GenerateRequest): GenerateRequest {
    const before = request.beforeAttempt;
    const fence = this.#fence;
    return {
      ...request,
      beforeAttempt: () => {
        fence.assertHeld();
        before?.();
      },
    };
  }
}

/** The model client, refusing to start a request (or a retry) once the fence says the lease is gone. */
export function fenceLlm(llm: LlmClient, fence: LeaseFence | undefined): LlmClient {
  return fence === undefined ? llm : new FencedLlm(llm, fence);
}
