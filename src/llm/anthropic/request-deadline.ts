/** Which limit a {@link RequestDeadline} hit. */
export type DeadlineKind = "first-byte" | "total";

export interface RequestDeadlineOptions {
  /** Total time for the request, body included. */
  totalMs: number;
  /** Time until {@link RequestDeadline.markFirstByte} (streaming); none when absent. */
  firstByteMs?: number;
}

/**
 * The abort signal of one request: aborted when the caller's signal aborts or when a timeout
 * fires, remembering which, so a timeout can be reported as a timeout rather than as a
 * cancellation (the SDK reports both as a user abort, and a stream it was reading simply ends).
 */
export class RequestDeadline {
  private readonly controller = new AbortController();
  private readonly timers: ReturnType<typeof setTimeout>[] = [];
  private firstByteTimer: ReturnType<typeof setTimeout> | undefined;
  private expired: DeadlineKind | undefined;
  private readonly onParentAbort = () => this.controller.abort(this.parent?.reason);

  constructor(
    private readonly parent: AbortSignal | undefined,
    readonly options: RequestDeadlineOptions,
  ) {
    if (parent?.aborted) this.controller.abort(parent.reason);
    else parent?.addEventListener("abort", this.onParentAbort, { once: true });
    this.timers.push(setTimeout(() => this.expire("total"), options.totalMs));
    if (options.firstByteMs !== undefined) {
      this.firstByteTimer = setTimeout(() => this.expire("first-byte"), options.firstByteMs);
      this.timers.push(this.firstByteTimer);
    }
  }

  /** Pass this to the request. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** The timeout that aborted the request, if one did (before any caller abort). */
  get expiredBy(): DeadlineKind | undefined {
    return this.expired;
  }

  /** The first byte arrived: only the total timeout applies from now on. */
  markFirstByte(): void {
    if (this.firstByteTimer !== undefined) clearTimeout(this.firstByteTimer);
    this.firstByteTimer = undefined;
  }

  /** Clears the timers and the listener on the caller's signal. Call once the request settled. */
  dispose(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.parent?.removeEventListener("abort", this.onParentAbort);
  }

  private expire(kind: DeadlineKind): void {
    if (this.controller.signal.aborted) return;
    this.expired = kind;
    this.controller.abort(new Error(`${kind} timeout`));
  }
}
