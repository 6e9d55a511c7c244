import { performance } from "node:perf_hooks";
import { describeError } from "../errors/describe-error.js";
import { SHUTDOWN_WAIT_MS, settlesWithin } from "./bounded-wait.js";
import { type LeaseFence, LeaseLostError } from "./lease-fence.js";
import {
  LeaseConflictError,
  type LeaseRecord,
  type SessionLeaseStore,
  type StoredLease,
} from "./session-lease.js";

/** How soon a renewal that failed (NATS away, a timeout) is tried again. */
const RENEW_RETRY_MS = 500;

/**
 * Renewals of one lease that may be in flight at once. A slow one does not hold the next back: each
 * tick sends another, all naming the revision last known, so at most one of them is stored. Bounded
 * so that a server that answers nothing is not sent a pile of them.
 */
const MAX_RENEWALS_IN_FLIGHT = 3;

export interface LeaseKeeperOptions {
  store: SessionLeaseStore;
  /** This host's id (a subject token). */
  hostId: string;
  /** Where other hosts forward this host's sessions' requests: `<prefix>.hosts.<hostId>`. */
  subject: string;
  /** The session's state for the lease record (`idle` / `busy`); read at every renewal. */
  stateOf?: (agent: string, session: string) => string | undefined;
  /**
   * The lease is gone (taken over, or not renewed before its local deadline): stop the session
   * now. Called once per lease, synchronously from a timer or a renewal's answer.
   */
  onLost: (agent: string, session: string, reason: string) => void;
  /** One-line notices (renewal failures). */
  log?: (line: string) => void;
  /** Monotonic clock in ms (default `performance.now`): a wall-clock jump must not stretch a lease. */
  monotonic?: () => number;
  /**
   * How often every lease is renewed (default TTL/3). More often keeps the stored expiry closer to
   * the moment a host dies, so others take over sooner.
   */
  renewEveryMs?: number;
  /** Whether the connection is up now: {@link LeaseKeeper.close} does not wait on releases while it is down. */
  isConnected?: () => boolean;
  /**
   * Told after each renewal how long it took from its send to its answer (or failure), ms: how a
   * lease that lapses on a busy host is explained (slow answers, or no renewal sent at all). A
   * renewal that lost the race to another of this host's renewals is not told as failed.
   */
  onRenewal?: (tookMs: number, isRenewed: boolean) => void;
  /**
   * Told each time a held lease's local deadline is set (at its acquisition) or moved on (a renewal
   * stored), with the lease as now known: how a lease renewed on one thread fences another.
   */
  onDeadline?: (lease: StoredLease, deadline: number) => void;
}

/** One lease this host holds. */
class HeldLease implements LeaseFence {
  lease: StoredLease;
  /** Monotonic time after which the lease is no longer used here. */
  deadline: number;
  lostReason: string | undefined;
  timer: NodeJS.Timeout | undefined;
  /** Renewals sent and not answered yet. */
  readonly renewing = new Set<Promise<void>>();
  /**
   * The monotonic send time of each renewal still useful, by the wall time it was stamped with: a
   * stored renewal whose answer was lost is recognised by its `renewedAt`, and counts from its send.
   */
  readonly sentAtByStamp = new Map<number, number>();
  readonly #monotonic: () => number;

  constructor(lease: StoredLease, deadline: number, monotonic: () => number) {
    this.lease = lease;
    this.deadline = deadline;
    this.#monotonic = monotonic;
  }

  get epoch(): number {
    return this.lease.record.epoch;
  }

  assertHeld(): void {
    if (this.lostReason !== undefined) {
      throw new LeaseLostError(
        `this host no longer owns session ${this.lease.agent}/${this.lease.session}: ${this.lostReason}`,
        this.epoch,
      );
    }
    if (this.#monotonic() >= this.deadline) {
      throw new LeaseLostError(
        `the lease of session ${this.lease.agent}/${this.lease.session} (epoch ${this.epoch}) ran out before it was renewed`,
        this.epoch,
      );
    }
  }
}

/**
 * The leases this host holds: acquires one when a session starts here, renews all of
 * them every TTL/3 (or `renewEveryMs`) with a compare-and-set, and gives each up when its session stops. A lease not
 * renewed in time is dropped locally at `expiry − skew` by this host's monotonic clock — before
 * any other host may take it (at `expiry + skew` by its wall clock) — and `onLost` stops the
 * session. Each held lease is the session's {@link LeaseFence}.
 */
export class LeaseKeeper {
  readonly hostId: string;
  readonly subject: string;
  readonly store: SessionLeaseStore;
  readonly #held = new Map<string, HeldLease>();
  readonly #releases = new Set<Promise<unknown>>();
  readonly #stateOf: (agent: string, session: string) => string | undefined;
  readonly #onLost: (agent: string, session: string, reason: string) => void;
  readonly #log: (line: string) => void;
  readonly #monotonic: () => number;
  readonly #renewEveryMs: number;
  readonly #isConnected: () => boolean;
  readonly #onRenewal: (tookMs: number, isRenewed: boolean) => void;
  readonly #onDeadline: (lease: StoredLease, deadline: number) => void;
  #ticker: NodeJS.Timeout | undefined;
  #isClosed = false;

  constructor(options: LeaseKeeperOptions) {
    this.store = options.store;
    this.hostId = options.hostId;
    this.subject = options.subject;
    this.#stateOf = options.stateOf ?? (() => undefined);
    this.#onLost = options.onLost;
    this.#log = options.log ?? (() => {});
    this.#monotonic = options.monotonic ?? (() => performance.now());
    this.#renewEveryMs = options.renewEveryMs ?? options.store.timing.ttlMs / 3;
    this.#isConnected = options.isConnected ?? (() => true);
    this.#onRenewal = options.onRenewal ?? (() => {});
    this.#onDeadline = options.onDeadline ?? (() => {});
  }

  /** Leases held now. */
  get size(): number {
    return this.#held.size;
  }

  /** The fence of a session this host holds (and has not lost), else undefined. */
  fenceOf(agent: string, session: string): LeaseFence | undefined {
    const held = this.#held.get(keyOf(agent, session));
    return held === undefined || held.lostReason !== undefined ? undefined : held;
  }

  /** True while this host holds a live lease of the session. */
  holds(agent: string, session: string): boolean {
    const held = this.#held.get(keyOf(agent, session));
    return held !== undefined && held.lostReason === undefined && this.#monotonic() < held.deadline;
  }

  /**
   * The live lease of another host, when there is one (a KV read); undefined when this host holds
   * it or nobody does (the session can be taken here).
   */
  async ownerElsewhere(agent: string, session: string): Promise<LeaseRecord | undefined> {
    if (this.holds(agent, session)) return undefined;
    // Past its deadline but its timer has not run yet (a busy loop, a pause): lose it now, so the
    // request is not handed to a session that can no longer write.
    const stale = this.#held.get(keyOf(agent, session));
    if (stale !== undefined) this.#lose(stale, "its lease was not renewed in time");
    const stored = await this.store.read(agent, session);
    if (stored === undefined) return undefined;
    const { record } = stored;
    const isFree =
      record.released === true ||
      record.host === this.hostId ||
      Date.now() > record.expiresAt + this.store.timing.skewMs;
    return isFree ? undefined : record;
  }

  /**
   * Takes the session's lease for this host.
   * @throws SessionOwnedElsewhereError when another host holds a live one.
   */
  async acquire(agent: string, session: string): Promise<LeaseFence> {
    if (this.#isClosed) throw new LeaseLostError("the host is shutting down", 0);
    const key = keyOf(agent, session);
    const sentAt = this.#monotonic();
    const lease = await this.store.acquire(agent, session, this.hostId, {
      subject: this.subject,
      ...stateField(this.#stateOf(agent, session) ?? "idle"),
    });
    const previous = this.#held.get(key);
    if (previous !== undefined) {
      // Superseded by the new epoch: its fence refuses, and a late answer to one of its renewals
      // cannot report the new lease lost.
      previous.lostReason ??= "taken again under a new epoch";
      this.#forget(previous);
    }
    const held = new HeldLease(lease, this.#deadlineFrom(sentAt), this.#monotonic);
    this.#held.set(key, held);
    this.#onDeadline(held.lease, held.deadline);
    this.#arm(held);
    this.#ticker ??= setInterval(() => this.#renewAll(), this.#renewEveryMs);
    this.#ticker.unref?.();
    return held;
  }

  /**
   * The session stopped here: gives its lease up (in the background; {@link close} waits). The
   * returned promise settles once the release is written (or failed and was logged).
   */
  release(agent: string, session: string): Promise<void> {
    const held = this.#held.get(keyOf(agent, session));
    if (held === undefined) return Promise.resolve();
    this.#forget(held);
    if (held.lostReason !== undefined || this.#monotonic() >= held.deadline) return Promise.resolve();
    held.lostReason = "released";
    // A renewal in flight would move the revision: release after them (a bounded wait: one that
    // lands later makes the release conflict, and the lease then runs out by itself).
    const release = settlesWithin(Promise.allSettled([...held.renewing]), SHUTDOWN_WAIT_MS)
      // Bounded: with NATS away a shutdown must not wait for it; the lease runs out by itself.
      .then(() => this.store.release(held.lease, { timeoutMs: SHUTDOWN_WAIT_MS }))
      .catch((error: unknown) => {
        this.#log(
          `could not release the lease of ${held.lease.agent}/${held.lease.session}: ${describeError(error)}; it expires in ${Math.round(this.store.timing.ttlMs / 1000)} s`,
        );
      });
    this.#releases.add(release);
    void release.finally(() => this.#releases.delete(release));
    return release.then(() => {});
  }

  /** Releases what is still held and waits for every release to be written. */
  async close(): Promise<void> {
    this.#isClosed = true;
    for (const held of [...this.#held.values()]) void this.release(held.lease.agent, held.lease.session);
    clearInterval(this.#ticker);
    this.#ticker = undefined;
    // Disconnected: the releases are queued for the reconnect; the leases run out by themselves.
    if (this.#isConnected() === false) return;
    await Promise.allSettled([...this.#releases]);
  }

  #deadlineFrom(sentAt: number): number {
    const { ttlMs, skewMs } = this.store.timing;
    return sentAt + ttlMs - skewMs;
  }

  /** The local deadline's timer: the session stops the moment its lease may no longer be used. */
  #arm(held: HeldLease): void {
    clearTimeout(held.timer);
    held.timer = setTimeout(
      () => this.#lose(held, "its lease was not renewed in time"),
      Math.max(0, held.deadline - this.#monotonic()),
    );
    held.timer.unref?.();
  }

  #renewAll(): void {
    for (const held of this.#held.values()) this.#renewHeld(held);
  }

  /**
   * Sends one more renewal, even while earlier ones are unanswered: a renewal answered slowly (a
   * loaded server, a stalled loop reading its answer) must not stop the next one from going out.
   */
  #renewHeld(held: HeldLease): void {
    if (held.lostReason !== undefined || held.renewing.size >= MAX_RENEWALS_IN_FLIGHT) return;
    const renewing: Promise<void> = this.#renew(held).finally(() => held.renewing.delete(renewing));
    held.renewing.add(renewing);
  }

  /**
   * One renewal, a compare-and-set on the revision last known. Renewals in flight together name the
   * same revision, so at most one is stored; the others conflict, read the lease back and find it
   * still this host's at the same epoch, which is no loss. Each counts from its own send: a stored
   * renewal extends the local deadline to its send + TTL − skew whenever its answer is read, or,
   * when its answer was lost, whenever a read shows its stamp. Nothing else extends it, so the host
   * stops using the lease before any other host may take it.
   */
  async #renew(held: HeldLease): Promise<void> {
    const sentAt = this.#monotonic();
    const stampedAt = this.store.now();
    const { agent, session } = held.lease;
    const { ttlMs, skewMs } = this.store.timing;
    this.#forgetUseless(held, sentAt);
    if (!held.sentAtByStamp.has(stampedAt)) held.sentAtByStamp.set(stampedAt, sentAt);
    try {
      const state = this.#stateOf(agent, session);
      // Waited for as long as its answer can still extend the lease (TTL − skew from its send).
      const renewed = await this.store.renew(held.lease, stateField(state), {
        timeoutMs: ttlMs - skewMs,
        renewedAt: stampedAt,
      });
      this.#onRenewal(this.#monotonic() - sentAt, true);
      // Kept even when released meanwhile: the release names the newest revision.
      if (renewed.revision > held.lease.revision) held.lease = renewed;
      this.#extend(held, sentAt);
      return;
    } catch (error) {
      if (error instanceof LeaseConflictError) {
        const found = await this.#readBack(held);
        // Beaten by a renewal of this host's own: no failure. When the stored one is known, it
        // extended the lease, as if this one had.
        if (found !== "kept") this.#onRenewal(this.#monotonic() - sentAt, found === "extended");
        if (found === "lost") return;
      } else {
        this.#onRenewal(this.#monotonic() - sentAt, false);
        this.#log(`could not renew the lease of ${agent}/${session}: ${describeError(error)}`);
      }
    }
    // NATS away or slow: try again soon rather than at the next tick (unless another renewal is
    // out already); the deadline timer ends the lease if none gets through in time.
    if (held.lostReason !== undefined || this.#held.get(keyOf(agent, session)) !== held) return;
    if (held.renewing.size > 1) return;
    const retry = setTimeout(() => this.#renewHeld(held), Math.min(RENEW_RETRY_MS, ttlMs / 6));
    retry.unref?.();
  }

  /**
   * A renewal conflicted: another renewal of this host was stored first (its answer late or lost),
   * or another host took the lease. The stored lease decides: this host's at the same epoch is
   * kept (and extended when it is one of this host's renewals); anything else is lost.
   * A failed read decides nothing: the next renewal asks again.
   */
  async #readBack(held: HeldLease): Promise<"extended" | "kept" | "lost" | "unknown"> {
    const { agent, session, record } = held.lease;
    let stored: StoredLease | undefined;
    try {
      stored = await this.store.read(agent, session);
    } catch (error) {
      this.#log(`could not read back the lease of ${agent}/${session}: ${describeError(error)}`);
      return "unknown";
    }
    if (
      stored?.record.host !== this.hostId ||
      stored.record.epoch !== record.epoch ||
      stored.record.released
    ) {
      this.#lose(held, "another host took its lease");
      return "lost";
    }
    if (stored.revision > held.lease.revision) held.lease = stored;
    const sentAt = held.sentAtByStamp.get(stored.record.renewedAt);
    if (sentAt === undefined) return "kept";
    this.#extend(held, sentAt);
    return "extended";
  }

  /** A renewal sent at `sentAt` was stored: the lease may be used until TTL − skew after that. */
  #extend(held: HeldLease, sentAt: number): void {
    if (held.lostReason !== undefined) return;
    // Past its deadline already (the answer was read after a stall): the lease was given up, or
    // is about to be by its timer, and a late answer does not bring it back.
    if (this.#monotonic() >= held.deadline) return;
    const deadline = this.#deadlineFrom(sentAt);
    if (deadline <= held.deadline) return;
    held.deadline = deadline;
    this.#onDeadline(held.lease, deadline);
    this.#arm(held);
  }

  /** Renewals sent so long ago that they could no longer extend the lease are not looked for. */
  #forgetUseless(held: HeldLease, now: number): void {
    for (const [stamp, sentAt] of held.sentAtByStamp) {
      if (this.#deadlineFrom(sentAt) <= now) held.sentAtByStamp.delete(stamp);
    }
  }

  #lose(held: HeldLease, reason: string): void {
    if (held.lostReason !== undefined) return;
    held.lostReason = reason;
    this.#forget(held);
    this.#onLost(held.lease.agent, held.lease.session, reason);
  }

  #forget(held: HeldLease): void {
    clearTimeout(held.timer);
    const key = keyOf(held.lease.agent, held.lease.session);
    if (this.#held.get(key) === held) this.#held.delete(key);
    if (this.#held.size === 0 && this.#ticker !== undefined) {
      clearInterval(this.#ticker);
      this.#ticker = undefined;
    }
  }
}

function keyOf(agent: string, session: string): string {
  return `${agent}/${session}`;
}

function stateField(state: string | undefined): Pick<LeaseRecord, "state"> {
  return state === undefined ? {} : { state };
}
