import { JetStreamApiCodes, JetStreamApiError } from "@nats-io/jetstream";
import { type KV, type KvEntry, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { DEFAULT_PREFIX, jetStreamName } from "../bus/subjects.js";
import { AgentloopError } from "../errors/agentloop-error.js";
import { listKvKeys } from "./kv-keys.js";

/**
 * Session leases in a JetStream KV bucket (single activation: one host runs a session at a time). Key `<agent>.<session>`,
 * value a {@link LeaseRecord}: which host owns the session, under which epoch, until when. Every
 * write is a compare-and-set on the key's revision, so two hosts can never both believe a write of
 * theirs made them the owner. nats-server 2.9 has no per-key TTL: the expiry is in the value and
 * every reader judges it by its own clock, allowing {@link LeaseTiming.skewMs} for clock skew.
 *
 * A released lease is not deleted but overwritten with `released: true`, keeping its epoch, so the
 * epoch only ever grows for a key (a delete would forget it, and a later owner could reuse an epoch
 * a stale holder still carries). The bucket's max age (a day) collects keys nobody renews.
 */

/** The bucket for the default prefix. */
export const SESSION_BUCKET = "AGENTLOOP_SESSIONS";

/** Default lease time to live (`--lease-ttl`). */
export const DEFAULT_LEASE_TTL_MS = 10_000;

/** Keys nobody renewed for this long leave the bucket (released and expired leases). */
const BUCKET_MAX_AGE_MS = 24 * 60 * 60 * 1000;

/** How often a conflicting acquisition re-reads and tries again before giving up. */
const ACQUIRE_ATTEMPTS = 5;

/** One session's lease, as stored. Times are ms since the epoch (the writer's clock). */
export const LeaseRecord = z.object({
  host: z.string(),
  epoch: z.number().int().nonnegative(),
  acquiredAt: z.number(),
  renewedAt: z.number(),
  expiresAt: z.number(),
  ttlMs: z.number().positive(),
  /** `idle` / `busy` as of the last renewal (the session's mailbox). */
  state: z.string().optional(),
  /** Where requests for the session are forwarded: `<prefix>.hosts.<host>`. */
  subject: z.string().optional(),
  released: z.boolean().optional(),
  /**
   * A shard's lease: the epoch of its host's lease (key `host.<host>`) it lives by. The shard is
   * held while that host lease, at that epoch, is live: renewing the host lease renews every shard.
   */
  hostEpoch: z.number().int().nonnegative().optional(),
});
export type LeaseRecord = z.infer<typeof LeaseRecord>;

/** A lease as read: the record and the revision a compare-and-set must name. */
export interface StoredLease {
  key: string;
  agent: string;
  session: string;
  record: LeaseRecord;
  revision: number;
}

/** The timing every host of a system should agree on. */
export interface LeaseTiming {
  ttlMs: number;
  /**
   * The clock error tolerated between hosts (`--lease-skew`, default 500 ms, at most TTL/5 by
   * default). The owner stops using a lease `skewMs` before its expiry by its own monotonic clock;
   * another host takes it only `skewMs` after the expiry by its wall clock: safe while clocks differ
   * by less than 2 × skewMs. A failover takes at most TTL + skew plus the takeover itself.
   */
  skewMs: number;
}

/** Default clock error tolerated between hosts (`--lease-skew`): NTP keeps hosts within milliseconds. */
export const DEFAULT_LEASE_SKEW_MS = 500;

/**
 * The timing of a TTL and a skew; the skew defaults to {@link DEFAULT_LEASE_SKEW_MS}, or a fifth
 * of the TTL when that is less (a short test TTL keeps a proportionate margin).
 * @throws RangeError when the TTL is not positive or the skew is negative or over a third of the TTL
 *   (the owner would stop using its lease before its next renewal could land).
 */
export function leaseTiming(
  ttlMs = DEFAULT_LEASE_TTL_MS,
  skewMs = Math.min(DEFAULT_LEASE_SKEW_MS, ttlMs / 5),
): LeaseTiming {
  if (!(ttlMs > 0)) throw new RangeError(`lease ttl must be positive, got ${ttlMs}`);
  if (!(skewMs >= 0 && skewMs <= ttlMs / 3)) {
    throw new RangeError(
      `lease skew must be from 0 to a third of the lease ttl (${ttlMs} ms), got ${skewMs}`,
    );
  }
  return { ttlMs, skewMs };
}

/** The session is owned by another host whose lease is live: forward to it. */
export class SessionOwnedElsewhereError extends AgentloopError {
  readonly code = "session_owned_elsewhere";
  readonly retryable = true;
  readonly owner: LeaseRecord;

  constructor(agent: string, session: string, owner: LeaseRecord) {
    super(`session ${agent}/${session} is owned by host ${owner.host} (epoch ${owner.epoch})`);
    this.owner = owner;
  }
}

/** A compare-and-set lost: someone else wrote the key first. */
export class LeaseConflictError extends AgentloopError {
  readonly code = "lease_conflict";
  readonly retryable = false;

  constructor(key: string, options?: { cause?: unknown }) {
    super(`the lease ${key} was changed by another host`, options);
  }
}

/** `AGENTLOOP_SESSIONS` for the default prefix, `<PREFIX>_SESSIONS` otherwise. */
export function sessionBucketName(prefix: string = DEFAULT_PREFIX): string {
  return jetStreamName(prefix, "SESSIONS");
}

/** `<agent>.<session>`: both are single tokens of `[A-Za-z0-9_-]`, valid KV key characters. */
export function leaseKey(agent: string, session: string): string {
  return `${agent}.${session}`;
}

/** True when the lease can be taken by `host` at wall-clock `now`. */
export function isLeaseFree(record: LeaseRecord, host: string, now: number, timing: LeaseTiming): boolean {
  return record.released === true || record.host === host || now > record.expiresAt + timing.skewMs;
}

export interface SessionLeaseStoreOptions {
  timing?: LeaseTiming;
  /** Wall clock, ms since the epoch. */
  now?: () => number;
}

/** The bucket's operations: read, acquire, renew, release, list. Holds no state of its own. */
export class SessionLeaseStore {
  readonly timing: LeaseTiming;
  readonly #kv: KV;
  readonly #now: () => number;
  /** Lists the bucket's keys (see {@link listKvKeys}). */
  readonly #keys: () => Promise<string[]>;

  private constructor(kv: KV, options: SessionLeaseStoreOptions, keys: () => Promise<string[]>) {
    this.#kv = kv;
    this.#keys = keys;
    this.timing = options.timing ?? leaseTiming();
    this.#now = options.now ?? Date.now;
  }

  /** Creates the bucket if needed (idempotent; an existing one keeps its settings) and opens it. */
  static async open(
    connection: NatsConnection,
    options: SessionLeaseStoreOptions & { prefix?: string; bucket?: string; replicas?: number } = {},
  ): Promise<SessionLeaseStore> {
    const name = options.bucket ?? sessionBucketName(options.prefix);
    const kv = await new Kvm(connection).create(name, {
      history: 1,
      ttl: BUCKET_MAX_AGE_MS,
      replicas: options.replicas ?? 1,
    });
    return new SessionLeaseStore(kv, options, () => listKvKeys(connection, name));
  }

  /** Opens the bucket without creating it; undefined when it does not exist (`agentloop sessions`). */
  static async openExisting(
    connection: NatsConnection,
    options: SessionLeaseStoreOptions & { prefix?: string } = {},
  ): Promise<SessionLeaseStore | undefined> {
    const kvm = new Kvm(connection);
    const name = sessionBucketName(options.prefix);
    for await (const status of kvm.list()) {
      if (status.bucket === name) {
        return new SessionLeaseStore(await kvm.open(name), options, () => listKvKeys(connection, name));
      }
    }
    return undefined;
  }

  /** This store's wall clock, ms since the epoch: what a renewal's `renewedAt` is stamped with. */
  now(): number {
    return this.#now();
  }

  /** The stored lease, or undefined when the key was never written (or was purged). */
  async read(agent: string, session: string): Promise<StoredLease | undefined> {
    const key = leaseKey(agent, session);
    return toStored(key, await this.#kv.get(key));
  }

  /**
   * Takes the session for `host`: creates the key, or replaces a released, expired or own lease
   * with a compare-and-set, the epoch one above the previous. A lost race re-reads and tries again.
   * @throws SessionOwnedElsewhereError when another host holds a live lease.
   */
  async acquire(
    agent: string,
    session: string,
    host: string,
    extra: Pick<LeaseRecord, "state" | "subject"> = {},
  ): Promise<StoredLease> {
    const key = leaseKey(agent, session);
    let lastConflict: unknown;
    for (let attempt = 0; attempt < ACQUIRE_ATTEMPTS; attempt++) {
      const current = await this.read(agent, session);
      const now = this.#now();
      if (current !== undefined && !isLeaseFree(current.record, host, now, this.timing)) {
        throw new SessionOwnedElsewhereError(agent, session, current.record);
      }
      const record: LeaseRecord = {
        host,
        epoch: (current?.record.epoch ?? 0) + 1,
        acquiredAt: now,
        renewedAt: now,
        expiresAt: now + this.timing.ttlMs,
        ttlMs: this.timing.ttlMs,
        ...extra,
      };
      try {
        const revision =
          current === undefined
            ? await this.#kv.create(key, JSON.stringify(record))
            : await this.#kv.update(key, JSON.stringify(record), current.revision);
        return { key, agent, session, record, revision };
      } catch (error) {
        if (!isConflict(error)) throw error;
        lastConflict = error;
      }
    }
    throw new LeaseConflictError(key, { cause: lastConflict });
  }

  /**
   * Extends a held lease by a TTL from `now` (compare-and-set on its revision). `renewedAt` stamps
   * it with a wall time taken by the caller, so a renewal whose answer was lost can be recognised
   * in the stored record afterwards.
   * @throws LeaseConflictError when the key was written meanwhile (by another host, or by another
   *   renewal of the same holder).
   */
  async renew(
    lease: StoredLease,
    extra: Pick<LeaseRecord, "state"> = {},
    options: { timeoutMs?: number; renewedAt?: number } = {},
  ): Promise<StoredLease> {
    const now = options.renewedAt ?? this.#now();
    const record: LeaseRecord = {
      ...lease.record,
      ...extra,
      renewedAt: now,
      expiresAt: now + this.timing.ttlMs,
      ttlMs: this.timing.ttlMs,
    };
    const revision = await this.#casUpdate(lease.key, record, lease.revision, options.timeoutMs);
    return { ...lease, record, revision };
  }

  /** Gives the lease up (its epoch kept). A lease already taken by another host is left alone. */
  async release(lease: StoredLease, options: { timeoutMs?: number } = {}): Promise<boolean> {
    const record: LeaseRecord = { ...lease.record, released: true, expiresAt: this.#now() };
    try {
      await this.#casUpdate(lease.key, record, lease.revision, options.timeoutMs);
      return true;
    } catch (error) {
      if (error instanceof LeaseConflictError) return false;
      throw error;
    }
  }

  /** Every stored lease (live, expired and released), in key order. */
  async list(): Promise<StoredLease[]> {
    // Leases are renewed all the time: the keys are asked of the stream at one moment.
    const keys = await this.#keys();
    const leases = await Promise.all(keys.map(async (key) => toStored(key, await this.#kv.get(key))));
    return leases.filter((lease): lease is StoredLease => lease !== undefined);
  }

  async #casUpdate(key: string, record: LeaseRecord, revision: number, timeoutMs?: number): Promise<number> {
    try {
      return await this.#kv.update(key, JSON.stringify(record), revision, timeoutMs);
    } catch (error) {
      if (isConflict(error)) throw new LeaseConflictError(key, { cause: error });
      throw error;
    }
  }
}

function toStored(key: string, entry: KvEntry | null): StoredLease | undefined {
  if (entry === null || entry.operation !== "PUT") return undefined;
  const dot = key.indexOf(".");
  let json: unknown;
  try {
    json = entry.json();
  } catch {
    return undefined;
  }
  const parsed = LeaseRecord.safeParse(json);
  // A value that is not a lease (written by something else) is treated as no lease at all.
  if (!parsed.success) return undefined;
  return {
    key,
    agent: key.slice(0, dot),
    session: key.slice(dot + 1),
    record: parsed.data,
    revision: entry.revision,
  };
}

/**
 * The server refused a compare-and-set: the key's revision is not the one named. nats.js reports
 * it as a {@link JetStreamApiError} with the server's error code (kv.create of an existing key
 * rejects with the same error), so the code decides, never the message.
 */
export function isConflict(error: unknown): boolean {
  return (
    error instanceof JetStreamApiError &&
    (error.code === JetStreamApiCodes.StreamWrongLastSequence ||
      error.code === JetStreamApiCodes.StreamWrongLastSequenceUnknown)
  );
}
