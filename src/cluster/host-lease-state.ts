import type { LeaseRecord, LeaseTiming } from "./session-lease.js";

/**
 * What the host lease's thread and the host's main thread share: the lease's epoch, its local
 * deadline and whether it was lost, in a SharedArrayBuffer written by the lease thread with
 * Atomics and read synchronously by the main thread's fence checks (no message has to be read
 * first, so a busy main loop still sees the lease as the lease thread last confirmed it).
 */

/** Slots of the shared array (64-bit integers). */
const EPOCH = 0;
/** The local deadline, µs on {@link sharedMonotonic}'s clock. */
const DEADLINE_US = 1;
/** The highest epoch known lost (taken over, or its deadline passed without a renewal). */
const LOST_EPOCH = 2;
/** The lease's KV revision as last stored by a renewal (for notices and tests). */
const REVISION = 3;
const SLOTS = 4;

/**
 * A monotonic clock in ms that every thread of the process reads alike (the system's monotonic
 * clock behind `process.hrtime`): the lease thread writes deadlines on it, the main thread compares
 * with it. A wall-clock jump moves neither.
 */
export function sharedMonotonic(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** Why a lease is not held now, or undefined while it is. */
export type NotHeld = "replaced" | "lost" | "expired";

/** The shared view of one host lease; both threads wrap the same buffer. */
export class SharedLeaseState {
  readonly buffer: SharedArrayBuffer;
  readonly #slots: BigInt64Array;

  constructor(buffer: SharedArrayBuffer = new SharedArrayBuffer(SLOTS * 8)) {
    if (buffer.byteLength < SLOTS * 8) {
      throw new RangeError(`the shared lease state needs ${SLOTS * 8} bytes, got ${buffer.byteLength}`);
    }
    this.buffer = buffer;
    this.#slots = new BigInt64Array(buffer, 0, SLOTS);
  }

  /**
   * The lease at `epoch` is held until `deadline` (ms, shared clock). A new epoch is written before
   * its deadline, so a reader of the old epoch that sees the new deadline also sees the new epoch.
   */
  write(epoch: number, deadline: number, revision: number): void {
    Atomics.store(this.#slots, EPOCH, BigInt(epoch));
    Atomics.store(this.#slots, REVISION, BigInt(revision));
    Atomics.store(this.#slots, DEADLINE_US, BigInt(Math.floor(deadline * 1000)));
  }

  /** The lease at `epoch` is gone: no deadline brings it back. */
  markLost(epoch: number): void {
    const lost = BigInt(epoch);
    if (Atomics.load(this.#slots, LOST_EPOCH) < lost) Atomics.store(this.#slots, LOST_EPOCH, lost);
  }

  /**
   * Whether the lease at `epoch` is held at `now` (shared clock): the epoch read before and after the
   * deadline, so a deadline written for a later epoch is never taken for this one's.
   */
  notHeld(epoch: number, now: number): NotHeld | undefined {
    const mine = BigInt(epoch);
    if (Atomics.load(this.#slots, EPOCH) !== mine) return "replaced";
    if (Atomics.load(this.#slots, LOST_EPOCH) >= mine) return "lost";
    const deadline = Number(Atomics.load(this.#slots, DEADLINE_US)) / 1000;
    if (Atomics.load(this.#slots, EPOCH) !== mine) return "replaced";
    return now >= deadline ? "expired" : undefined;
  }

  /** The deadline last written, ms on the shared clock. */
  get deadline(): number {
    return Number(Atomics.load(this.#slots, DEADLINE_US)) / 1000;
  }

  /** The KV revision last stored. */
  get revision(): number {
    return Number(Atomics.load(this.#slots, REVISION));
  }
}

/** How the lease thread reaches NATS: the host's own connection settings (plain data, copied to it). */
export interface LeaseThreadConnect {
  /** `nats://[user:pass@|token@]host[:port]`, `tls://…`, or a comma-separated list. */
  url: string;
  credsFile?: string;
  inboxPrefix?: string;
  /** Connection name shown by the server's monitoring. */
  name?: string;
}

/** One lease the thread keeps: a host lease of one bucket (one per served prefix, tenants too). */
export interface LeaseThreadLease {
  /** Names the lease in messages: `<bucket>/<agent>.<hostId>#<n>`, one per holder in the process. */
  key: string;
  /** The KV bucket of the host leases (created by the main thread before the first acquisition). */
  bucket: string;
  /** The bucket's replicas, as the main thread created it (opening names the same settings). */
  replicas?: number;
  timing: LeaseTiming;
  hostId: string;
  /** `<prefix>.hosts.<hostId>`, written into the lease. */
  subject: string;
  /** The agent part of the lease key (`host`). */
  agent: string;
  renewEveryMs: number;
  /** Where the thread writes the lease's epoch and deadline ({@link SharedLeaseState}). */
  state: SharedArrayBuffer;
}

/** What the lease thread starts with. */
export interface LeaseThreadData {
  connect: LeaseThreadConnect;
}

/** Main thread → lease thread. */
export type ToLeaseThread =
  | { type: "acquire"; id: number; lease: LeaseThreadLease }
  | { type: "release"; id: number; key: string }
  | { type: "close" };

/** Lease thread → main thread. */
export type FromLeaseThread =
  | { type: "acquired"; id: number; epoch: number }
  | { type: "acquire-failed"; id: number; message: string; owner?: LeaseRecord }
  | { type: "released"; id: number }
  | { type: "lost"; key: string; epoch: number; reason: string }
  | { type: "log"; key: string | undefined; line: string };
