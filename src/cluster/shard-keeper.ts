import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetStreamName } from "../bus/subjects.js";
import { describeError } from "../errors/describe-error.js";
import { listKvKeys } from "./kv-keys.js";
import type { LeaseFence } from "./lease-fence.js";
import { LeaseKeeper } from "./lease-keeper.js";
import type { Membership } from "./membership.js";
import {
  isLeaseFree,
  LeaseRecord,
  type LeaseTiming,
  SessionLeaseStore,
  SessionOwnedElsewhereError,
} from "./session-lease.js";
import { preferredOwner, shardOf } from "./shard-map.js";
import { entryJson, WatchedBucket } from "./watched-bucket.js";

/** The shard leases' keys are `shard.<n>`: the lease store's `<agent>.<session>` with agent `shard`. */
const SHARD_AGENT = "shard";

/** How many shards one host acquires or hands over at once. */
const PARALLEL_MOVES = 32;

/** `AGENTLOOP_SHARDS` for the default prefix. */
export function shardsBucketName(prefix: string): string {
  return jetStreamName(prefix, "SHARDS");
}

export interface ShardKeeperOptions {
  connection: NatsConnection;
  prefix: string;
  hostId: string;
  /** `<prefix>.hosts.<hostId>`, written into each lease so others know where to forward. */
  subject: string;
  shardCount: number;
  timing: LeaseTiming;
  membership: Membership;
  replicas?: number;
  /**
   * Before a shard is handed to another host: stop taking its requests, let what runs finish (or
   * park it in its journal) and stop its sessions. The shard is released when this resolves.
   */
  drain: (shard: number) => Promise<void>;
  /** A shard's lease is gone (not renewed in time, taken over): stop its sessions now. */
  onLost: (shard: number, reason: string) => void;
  log?: (line: string) => void;
  now?: () => number;
}

/** Where a session's requests go now, as the shard map says. */
export type ShardPlace =
  | { where: "here"; shard: number }
  | { where: "elsewhere"; shard: number; host: string; subject: string; isLeaseHolder: boolean }
  | { where: "changing"; shard: number; reason: string };

/**
 * The shards this host owns. Each shard is a lease in the `<PREFIX>_SHARDS` bucket (the same
 * compare-and-set, epoch and TTL rules as a session lease had), kept by a {@link LeaseKeeper}: the
 * upkeep is one renewal per owned shard per TTL/3, whatever the number of sessions in them. The
 * leases of every host are followed by a KV watch (the shard map), so placing a request costs no
 * read. A balancer moves shards to their preferred member ({@link preferredOwner} over the live
 * members): a host takes the free shards that prefer it and hands over, after draining them, the
 * ones that prefer another live host.
 */
export class ShardKeeper {
  readonly shardCount: number;
  readonly hostId: string;
  readonly leases: LeaseKeeper;
  readonly #options: ShardKeeperOptions;
  readonly #table: WatchedBucket<LeaseRecord>;
  readonly #draining = new Map<number, Promise<void>>();
  readonly #acquiring = new Map<number, Promise<LeaseFence>>();
  readonly #waiters = new Map<number, Set<() => void>>();
  /** The epoch of each shard this host released, until the watch shows a newer lease. */
  readonly #released = new Map<number, number>();
  readonly #now: () => number;
  #assignment: (string | undefined)[] = [];
  #timer: NodeJS.Timeout | undefined;
  #balancing: Promise<void> | undefined;
  #isLeaving = false;

  private constructor(options: ShardKeeperOptions, store: SessionLeaseStore) {
    this.#options = options;
    this.shardCount = options.shardCount;
    this.hostId = options.hostId;
    this.#now = options.now ?? Date.now;
    this.leases = new LeaseKeeper({
      store,
      hostId: options.hostId,
      subject: options.subject,
      onLost: (_agent, shard, reason) => {
        this.#wake(Number(shard));
        options.onLost(Number(shard), reason);
      },
      ...(options.log === undefined ? {} : { log: options.log }),
    });
    this.#table = new WatchedBucket<LeaseRecord>(
      (entry) => {
        const parsed = LeaseRecord.safeParse(entryJson(entry));
        return parsed.success ? parsed.data : undefined;
      },
      (key) => this.#wake(Number(key.slice(SHARD_AGENT.length + 1))),
    );
  }

  /** Opens the shard bucket and its watch; the balancer starts with {@link start}. */
  static async open(options: ShardKeeperOptions): Promise<ShardKeeper> {
    const bucket = shardsBucketName(options.prefix);
    const store = await SessionLeaseStore.open(options.connection, {
      bucket,
      timing: options.timing,
      ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
    });
    const keeper = new ShardKeeper(options, store);
    const kv = await new Kvm(options.connection).open(bucket);
    await keeper.#table.start(kv, await listKvKeys(options.connection, bucket));
    return keeper;
  }

  /** Starts balancing: at once, on every membership change, and every TTL/10 (at most 1 s). */
  start(): void {
    this.membershipChanged();
    this.#timer = setInterval(() => this.#balance(), Math.min(1_000, this.#options.timing.ttlMs / 10));
    this.#timer.unref();
  }

  /** The members changed: the preferred owners are computed again and the balancer runs. */
  membershipChanged(): void {
    const members = this.#options.membership.live().map((member) => member.host);
    this.#assignment = Array.from({ length: this.shardCount }, (_, shard) => preferredOwner(shard, members));
    for (const shard of this.#waiters.keys()) this.#wake(shard);
    this.#balance();
  }

  shardOf(agent: string, session: string): number {
    return shardOf(agent, session, this.shardCount);
  }

  /** The shards this host holds now. */
  get heldCount(): number {
    return this.leases.size;
  }

  /** True while this host holds the shard and is not handing it over. */
  isServing(shard: number): boolean {
    return !this.#draining.has(shard) && this.leases.holds(SHARD_AGENT, String(shard));
  }

  /** True while the shard is being handed over from this host. */
  isDraining(shard: number): boolean {
    return this.#draining.has(shard);
  }

  /** The shard's fence, while this host holds it. */
  fenceOf(shard: number): LeaseFence | undefined {
    return this.leases.fenceOf(SHARD_AGENT, String(shard));
  }

  /** The live lease of the shard as the map shows it (another host's, or this one's). */
  leaseOf(shard: number): LeaseRecord | undefined {
    const record = this.#table.get(`${SHARD_AGENT}.${shard}`)?.value;
    if (record === undefined) return undefined;
    if (record.host === this.hostId && record.epoch <= (this.#released.get(shard) ?? -1)) return undefined;
    return isLeaseFree(record, "", this.#now(), this.#options.timing) ? undefined : record;
  }

  /** Whether this host may take the free shard now (it prefers this host, or its preferred one is gone). */
  mayTake(shard: number, options: { isForwarded?: boolean } = {}): boolean {
    if (this.#isLeaving) return false;
    const preferred = this.#assignment[shard];
    if (preferred === undefined || preferred === this.hostId || options.isForwarded === true) return true;
    return this.#options.membership.liveMember(preferred) === undefined;
  }

  /** Where requests for `shard` go now, without I/O. */
  place(shard: number, options: { isForwarded?: boolean } = {}): ShardPlace {
    if (this.#draining.has(shard)) return { where: "changing", shard, reason: "it is being handed over" };
    if (this.leases.holds(SHARD_AGENT, String(shard))) return { where: "here", shard };
    const lease = this.leaseOf(shard);
    if (lease !== undefined && lease.host !== this.hostId) {
      return {
        where: "elsewhere",
        shard,
        host: lease.host,
        subject: lease.subject ?? `${this.#options.prefix}.hosts.${lease.host}`,
        isLeaseHolder: true,
      };
    }
    if (this.mayTake(shard, options)) return { where: "changing", shard, reason: "it is free" };
    const preferred = this.#assignment[shard];
    const member = preferred === undefined ? undefined : this.#options.membership.liveMember(preferred);
    if (member === undefined) return { where: "changing", shard, reason: "no live host prefers it" };
    return { where: "elsewhere", shard, host: member.host, subject: member.subject, isLeaseHolder: false };
  }

  /**
   * Takes the shard for this host (a compare-and-set), or returns its fence when held already.
   * @throws SessionOwnedElsewhereError when another host holds a live lease of it.
   */
  acquire(shard: number): Promise<LeaseFence> {
    const held = this.fenceOf(shard);
    if (held !== undefined && !this.#draining.has(shard)) return Promise.resolve(held);
    const running = this.#acquiring.get(shard);
    if (running !== undefined) return running;
    const acquiring = (async () => {
      if (this.#draining.has(shard) || this.#isLeaving) {
        const lease = this.leaseOf(shard);
        throw new SessionOwnedElsewhereError(SHARD_AGENT, String(shard), {
          host: this.hostId,
          epoch: lease?.epoch ?? 0,
          acquiredAt: 0,
          renewedAt: 0,
          expiresAt: 0,
          ttlMs: this.#options.timing.ttlMs,
        });
      }
      return this.leases.acquire(SHARD_AGENT, String(shard));
    })().finally(() => {
      this.#acquiring.delete(shard);
      this.#wake(shard);
    });
    this.#acquiring.set(shard, acquiring);
    return acquiring;
  }

  /** Resolves when the shard's lease or the members change, or after `ms`. */
  whenChanged(shard: number, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const waiters = this.#waiters.get(shard) ?? new Set<() => void>();
      this.#waiters.set(shard, waiters);
      const done = () => {
        clearTimeout(timer);
        waiters.delete(done);
        if (waiters.size === 0 && this.#waiters.get(shard) === waiters) this.#waiters.delete(shard);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      timer.unref?.();
      waiters.add(done);
    });
  }

  /** The host shuts down: takes no more shards. {@link close} releases what is held. */
  leave(): void {
    this.#isLeaving = true;
  }

  /**
   * The host shuts down: drains and releases every shard it holds, as at a hand-over (requests
   * for them wait meanwhile, then go to the shards' next owners). Resolves when all are released.
   */
  async handOverAll(): Promise<void> {
    this.#isLeaving = true;
    for (let shard = 0; shard < this.shardCount; shard++) {
      if (!this.#draining.has(shard) && this.leases.holds(SHARD_AGENT, String(shard))) this.#handOver(shard);
    }
    await Promise.allSettled([...this.#draining.values()]);
  }

  /** Stops balancing and releases every shard still held (after the sessions stopped). */
  async close(): Promise<void> {
    this.#isLeaving = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#balancing?.catch(() => {});
    await Promise.allSettled([...this.#draining.values()]);
    await this.leases.close();
    this.#table.close();
  }

  #wake(shard: number): void {
    const waiters = this.#waiters.get(shard);
    if (waiters === undefined) return;
    for (const wake of [...waiters]) wake();
  }

  /** One pass of the balancer (never two at once). */
  #balance(): void {
    if (this.#balancing !== undefined) return;
    this.#balancing = this.#balanceOnce()
      .catch((error: unknown) => this.#options.log?.(`shard balancing: ${describeError(error)}`))
      .finally(() => {
        this.#balancing = undefined;
      });
  }

  async #balanceOnce(): Promise<void> {
    const toTake: number[] = [];
    const toHand: number[] = [];
    for (let shard = 0; shard < this.shardCount; shard++) {
      if (this.#draining.has(shard) || this.#acquiring.has(shard)) continue;
      const preferred = this.#assignment[shard];
      if (this.leases.holds(SHARD_AGENT, String(shard))) {
        const isPreferredElsewhere =
          preferred !== undefined &&
          preferred !== this.hostId &&
          this.#options.membership.liveMember(preferred) !== undefined;
        if (isPreferredElsewhere && !this.#isLeaving) toHand.push(shard);
      } else if (this.leaseOf(shard) === undefined && this.mayTake(shard)) {
        toTake.push(shard);
      }
    }
    for (const shard of toHand) this.#handOver(shard);
    await inBatches(toTake, PARALLEL_MOVES, async (shard) => {
      if (this.leaseOf(shard) !== undefined || this.leases.holds(SHARD_AGENT, String(shard))) return;
      await this.acquire(shard).catch(() => {
        // Another host was quicker, or NATS is away: the next pass looks again.
      });
    });
  }

  /** Drains the shard here, then releases it for its preferred host to take. */
  #handOver(shard: number): void {
    const handing = (async () => {
      try {
        await this.#options.drain(shard);
      } finally {
        const epoch = this.fenceOf(shard)?.epoch;
        await this.leases.release(SHARD_AGENT, String(shard));
        // Known here at once; the watch brings the same news a moment later.
        if (epoch !== undefined) this.#released.set(shard, epoch);
      }
    })()
      .catch((error: unknown) => this.#options.log?.(`handing over shard ${shard}: ${describeError(error)}`))
      .finally(() => {
        this.#draining.delete(shard);
        this.#wake(shard);
      });
    this.#draining.set(shard, handing);
    this.#wake(shard);
  }
}

async function inBatches<T>(
  items: readonly T[],
  size: number,
  run: (item: T) => Promise<void>,
): Promise<void> {
  for (let start = 0; start < items.length; start += size) {
    await Promise.all(items.slice(start, start + size).map(run));
  }
}
