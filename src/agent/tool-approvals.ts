import type { AnyActorRef } from "xstate";
import type { ApprovalEvent, ApprovalRequest } from "../../machines/iteration.machine.js";
import type { ContextHistory } from "../context/context-history.js";
import type { PendingApproval } from "../context/pending-approval.js";
import type { EventEmitter } from "../events/event-emitter.js";
import { chatCancelEvent } from "./chat-cancel.js";

/** A person's answer about one held tool call (the control subject's `approve` / `deny`). */
export interface ToolApprovalDecision {
  toolCallId: string;
  approved: boolean;
  /** Why it was denied: the model sees it in the call's result. */
  reason?: string;
  /** The arguments text the person saw: a decision about other arguments is refused. */
  arguments?: string;
}

/** Whether a decision was taken; a refusal says why (unknown call, already decided, other arguments). */
export type ApprovalOutcome = { ok: true } | { ok: false; message: string };

/** The chat actor currently running in the session, and the approval it waits for, if any. */
interface LiveChat {
  actor: AnyActorRef;
  pending: PendingApproval | undefined;
  /** The write of `pending` (decisions wait for it: the approval must be durable first). */
  saving: Promise<void>;
  /** Stopped on shutdown with its approval kept for the next host. */
  isParked: boolean;
  /** Restored from a parked approval (its answer goes to a retry of its request id, if any). */
  isResumed: boolean;
  /** The client's request id of the chat, kept with its approval record. */
  requestId: string | undefined;
  /** Resolves when the chat has let go (see {@link ToolApprovals.detach}). */
  detached: Promise<void>;
  markDetached(): void;
}

export interface ToolApprovalsParams {
  history: ContextHistory | undefined;
  events: EventEmitter;
  /** How the events show a text (secrets hidden): the arguments a person saw. Default: as is. */
  redact?: (text: string) => string;
  /** What the history held when the session was built (a chat stopped while awaiting approval). */
  parked: PendingApproval | undefined;
  /**
   * Restarts a parked chat from its persisted snapshot through the agent's queue. Resolves once its
   * actor is attached (see {@link ToolApprovals.attach}); rejects when it cannot be restored.
   */
  resume(pending: PendingApproval): Promise<void>;
  /** The tools the session's callers need approval for: kept with a parked approval. */
  inheritedApprovals?(): readonly string[];
}

/**
 * The tool approvals of one session: which chat waits for which calls, the record of it
 * in the history (so it survives passivation and a host restart), and the decisions people send.
 * A decision binds to the exact arguments announced and is used once: the record is taken when the
 * last held call is decided, or when the chat ends any other way (`stop` cancels it).
 */
export class ToolApprovals {
  /** Kept whole and called as methods: a session passes one object, not a closure for each. */
  readonly #params: ToolApprovalsParams;
  #live: LiveChat | undefined;
  #parked: PendingApproval | undefined;
  #resuming: Promise<void> | undefined;

  constructor(params: ToolApprovalsParams) {
    this.#params = params;
    this.#parked = params.parked;
  }

  get #history(): ContextHistory | undefined {
    return this.#params.history;
  }

  get #events(): EventEmitter {
    return this.#params.events;
  }

  #redact(text: string): string {
    return this.#params.redact === undefined ? text : this.#params.redact(text);
  }

  get isPending(): boolean {
    return this.#parked !== undefined || this.#live?.pending !== undefined;
  }

  /** The approval record the session was built with, while its chat has not been brought back. */
  get parked(): PendingApproval | undefined {
    return this.#parked;
  }

  /**
   * A chat actor starts (`pending`: a parked chat coming back; `requestId`: the client's id of a
   * new chat's request).
   */
  attach(actor: AnyActorRef, pending?: PendingApproval, requestId?: string): void {
    let markDetached!: () => void;
    const detached = new Promise<void>((resolve) => {
      markDetached = resolve;
    });
    this.#live = {
      actor,
      pending,
      saving: Promise.resolve(),
      isParked: false,
      isResumed: pending !== undefined,
      requestId: pending === undefined ? requestId : pending.requestId,
      detached,
      markDetached,
    };
  }

  /**
   * The chat actor ended (or was parked). An approval it still held is spent: a cancelled or
   * failed chat back-filled its calls, so the record goes. Resolves with whether it was parked.
   */
  async detach(actor: AnyActorRef): Promise<boolean> {
    const live = this.#live;
    if (live?.actor !== actor) return false;
    this.#live = undefined;
    try {
      if (live.isParked) {
        await live.saving;
        this.#parked = live.pending;
        return true;
      }
      if (live.pending !== undefined) {
        await live.saving;
        await this.#history?.takePendingApproval?.();
      }
      return false;
    } finally {
      live.markDetached();
    }
  }

  /**
   * The iteration entered `awaitingApproval`: persist the chat, then publish the requests. In that
   * order, so whoever sees a ToolApprovalRequested can rely on it surviving a host that dies next.
   */
  announce(iteration: number, requests: readonly ApprovalRequest[]): void {
    const live = this.#live;
    if (live === undefined) return;
    const inherited = this.#params.inheritedApprovals?.() ?? [];
    const pending: PendingApproval = {
      chatId: this.#events.chatId,
      iteration,
      calls: requests.map((request) => ({ ...request })),
      snapshot: {},
      ...(live.requestId === undefined ? {} : { requestId: live.requestId }),
      // A parked chat restored on another host keeps asking for what its callers need approved.
      ...(inherited.length === 0 ? {} : { approvalRequired: [...inherited] }),
    };
    live.pending = pending;
    // After the current macrostep, so the snapshot shows the iteration in awaitingApproval.
    live.saving = Promise.resolve().then(async () => {
      try {
        pending.snapshot = live.actor.getPersistedSnapshot() as Record<string, unknown>;
        await this.#history?.savePendingApproval?.(pending);
      } finally {
        for (const request of requests) {
          this.#events.emit(iteration, { kind: "ToolApprovalRequested", ...request });
        }
      }
    });
    // A failed write leaves the approval in memory only; the decision path reports nothing more.
    live.saving.catch(() => {});
  }

  /** A person approves or denies one held call. */
  async decide(decision: ToolApprovalDecision): Promise<ApprovalOutcome> {
    await this.resumeParked();
    const live = this.#live;
    if (live?.pending === undefined) {
      return { ok: false, message: "no tool call of this session is waiting for approval" };
    }
    await live.saving.catch(() => {});
    const pending = live.pending;
    if (pending === undefined) {
      return { ok: false, message: "no tool call of this session is waiting for approval" };
    }
    const call = pending.calls.find((candidate) => candidate.toolCallId === decision.toolCallId);
    if (call === undefined || call.decision !== undefined) {
      return {
        ok: false,
        message: `tool call "${decision.toolCallId}" is not waiting for approval (unknown, or already decided)`,
      };
    }
    // The event showed the arguments with secrets hidden: either form is the one shown.
    const shown = decision.arguments;
    if (shown !== undefined && shown !== call.arguments && shown !== this.#redact(call.arguments)) {
      return {
        ok: false,
        message: `tool call "${decision.toolCallId}" was asked with other arguments than the ones given`,
      };
    }
    call.decision = {
      approved: decision.approved,
      ...(decision.reason !== undefined ? { reason: decision.reason } : {}),
    };
    if (pending.calls.every((candidate) => candidate.decision !== undefined)) {
      live.pending = undefined;
      // Used once: of two hosts holding the same record, only one takes it.
      const taken = (await this.#history?.takePendingApproval?.()) ?? true;
      if (!taken) {
        // Another host took it and goes on with the chat: this copy stops, writing nothing.
        live.isParked = true;
        live.actor.stop();
        return { ok: false, message: `the approval of "${decision.toolCallId}" was already used` };
      }
    } else {
      await this.#history?.savePendingApproval?.(pending);
    }
    this.#send(live.actor, toApprovalEvent(call, call.decision));
    return { ok: true };
  }

  /** `stop`: the chat awaiting approval is cancelled (its held calls get `cancelled` results). */
  async cancel(): Promise<void> {
    await this.resumeParked().catch(() => {});
    const live = this.#live;
    if (live?.pending !== undefined && live.actor.getSnapshot().status === "active") {
      live.actor.send(chatCancelEvent(live.actor));
    }
  }

  /**
   * Shutdown: a chat awaiting approval is stopped where it stands, its record kept for the next
   * host (a restart or the session's next life); a resumed chat still running after its decisions
   * is cancelled like any running chat (it back-fills and writes its history). Resolves, once the
   * chat has let go, with whether one was parked.
   */
  async park(): Promise<boolean> {
    const live = this.#live;
    if (live === undefined || live.actor.getSnapshot().status !== "active") return false;
    if (live.pending !== undefined) {
      live.isParked = true;
      live.actor.stop();
      await live.detached;
      return true;
    }
    if (live.isResumed) {
      live.actor.send(chatCancelEvent(live.actor));
      await live.detached;
    }
    return false;
  }

  /**
   * Brings a parked chat back (once), first in the agent's queue: decisions and `stop` reach a
   * running machine, and a later chat waits behind it as it would have on the first host.
   */
  resumeParked(): Promise<void> {
    const parked = this.#parked;
    if (parked === undefined || this.#live !== undefined) return this.#resuming ?? Promise.resolve();
    this.#parked = undefined;
    this.#resuming = this.#params.resume(parked).then(() => {
      // Decisions taken before the restart are replayed into the restored machine.
      const live = this.#live;
      if (live === undefined) return;
      for (const call of parked.calls) {
        if (call.decision) this.#send(live.actor, toApprovalEvent(call, call.decision));
      }
    });
    this.#resuming.catch(() => {});
    return this.#resuming;
  }

  /** The decision goes to the iteration (the chat's invoked child), where the calls are held. */
  #send(chat: AnyActorRef, event: ApprovalEvent): void {
    const children = Object.values(chat.getSnapshot().children ?? {}) as AnyActorRef[];
    const iteration = children.find(
      (child) => (child.getSnapshot() as { machine?: { id?: string } }).machine?.id === "iteration",
    );
    iteration?.send(event);
  }
}

/**
 * The machine's event for a decision, bound to the call's id and the arguments it was announced
 * with: the iteration takes it only for the call it held with exactly those arguments.
 */
function toApprovalEvent(
  call: { toolCallId: string; arguments: string },
  decision: { approved: boolean; reason?: string | undefined },
): ApprovalEvent {
  const { toolCallId } = call;
  if (decision.approved) return { type: "approval.granted", toolCallId, arguments: call.arguments };
  return {
    type: "approval.denied",
    toolCallId,
    arguments: call.arguments,
    ...(decision.reason !== undefined ? { reason: decision.reason } : {}),
  };
}
