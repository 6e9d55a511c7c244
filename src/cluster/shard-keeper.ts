import { createHash } from "node:crypto";
import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { jetStreamName } from "../bus/subjects.js";
import { describeError } from "../errors/describe-error.js";
import { SHUTDOWN_RELEASE_WAIT_MS, settlesWithin } from "./bounded-wait.js";
import type { LeaseThreadConnect } from "./host-lease-state.js";
import { HOST_LEASE_WORKER_URL, HostLeaseThread, hostLeaseWorkerExists } from "./host-lease-thread.js";
import { listKvKeys } from "./kv-keys.js";
import { type LeaseFence, LeaseLostError } from "./lease-fence.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { isSameAgentSet, type Membership } from "./membership.js";
import { RenewalWatch } from "./renewal-watch.js";
import {
  isConflict,
  isLeaseFree,
  LeaseRecord,
  type LeaseTiming,
  SessionLeaseStore,
  SessionOwnedElsewhereError,
} from "./session-lease.js";
import { preferredOwner, shardOf } from "./shard-map.js";
import { entryJson, WatchedBucket } from "./watched-bucket.js";

/**
 * The shard leases' keys are `shard.<n>`, or `shard_<group>.<n>` for hosts that name the agents they
 * serve: each set of agents has shards of its own, held by the hosts serving it.
 */
function shardKeyAgent(agents: readonly string[] | undefined): string {
  if (agents === undefined) return "shard";
  return `shard_${createHash("sha256").update(agents.join(",")).digest("hex").slice(0, 12)}`;
}

/** Each host's lease is `host.<id>`: the lease store's `<agent>.<session>` with agent `host`. */
const HOST_AGENT = "host";
/** What every host lease's key in the table starts with. */
const HOST_KEY_PREFIX = `${HOST_AGENT}.`;

/** How many shards one host acquires or hands over at once. */
const PARALLEL_MOVES = 32;

/**
 * How often a host renews its own lease, as a share of the TTL: a dead host's stored expiry is at
 * most TTL/5 past its death on average half that, so its shards are taken sooner.
 */
const HOST_RENEWALS_PER_TTL = 5;

/** `AGENTLOOP_SHARDS` for the default prefix. */
export function shardsBucketName(prefix: string): string {
  return jetStreamName(prefix, "SHARDS");
}

export interface ShardKeeperOptions {
  /** The agents this host serves, sorted: only hosts serving the same agents share its shards. */
  agents?: readonly string[];
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
  /** Whether the connection is up now: releases at shutdown are not waited for while it is down. */
  isConnected?: () => boolean;
  /**
   * Renew this host's own lease on a worker thread with a NATS connection of its own (made with
   * these settings, the host's), so that a main event loop stalled by load cannot make it lapse.
   * Without it (or when the thread's compiled code is not there, as when run from the TypeScript
   * sources) the lease is renewed on the main thread over `connection`.
   */
  leaseThread?: { connect: LeaseThreadConnect; workerUrl?: URL };
}

/** This host's own lease, renewed on the main thread or on a thread of its own. */
interface HostLease {
  acquire(): Promise<LeaseFence>;
  /** Its fence while held (not lost yet). */
  fence(): LeaseFence | undefined;
  /** Releases it (a compare-and-set) and stops renewing. */
  close(): Promise<void>;
}

/** Where a session's requests go now, as the shard map says. */
export type ShardPlace =
  | { where: "here"; shard: number }
  | { where: "elsewhere"; shard: number; host: string; subject: string; isLeaseHolder: boolean }
  | { where: "changing"; shard: number; reason: string };

/** One shard this host holds: its fence checks the shard is still held and the host lease live. */
class HeldShard implements LeaseFence {
  lostReason: string | undefined;

  constructor(
    readonly shard: number,
    readonly record: LeaseRecord,
    public revision: number,
    readonly host: LeaseFence,
  ) {}

  get epoch(): number {
    return this.record.epoch;
  }

  assertHeld(): void {
    if (this.lostReason !== undefined) {
      throw new LeaseLostError(
        `this host no longer owns shard ${this.shard}: ${this.lostReason}`,
        this.epoch,
      );
    }
    this.host.assertHeld();
  }
}

/**
 * The shards this host owns. Each host holds one lease of its own in the `<PREFIX>_SHARDS` bucket
 * (key `host.<id>`; compare-and-set, epoch, TTL and skew rules of a session lease), renewed every
 * TTL/3 by a {@link LeaseKeeper}. A shard's lease (key `shard.<n>`) names its host and the epoch of
 * that host's lease; it is held while that host lease, at that epoch, is live. So the upkeep is one
 * write per host per TTL/3, whatever the number of shards or sessions; a shard record is written
 * only when it changes hands. Taking a shard whose host lease ran out first takes that host lease
 * over (a compare-and-set the dead host's next renewal would lose), so a paused host can never
 * renew its way back into shards another host took.
 *
 * Every host's leases are followed by a KV watch (the shard map), so placing a request costs no
 * read. A balancer moves shards to their preferred member ({@link preferredOwner} over the live
 * members): a host takes the free shards that prefer it and hands over, after draining them, the
 * ones that prefer another live host.
 */
export class ShardKeeper {
  readonly shardCount: number;
  readonly hostId: string;
  readonly #options: ShardKeeperOptions;
  /** The agent part of this host's shard keys (see {@link shardKeyAgent}). */
  readonly #shardAgent: string;
  readonly #hostLease: HostLease;
  readonly #store: SessionLeaseStore;
  readonly #kv: KV;
  readonly #table: WatchedBucket<LeaseRecord>;
  /**
   * Each shard's key in the table, and each host's: made once, since the balancer looks at every
   * shard every second and an idle host should make no garbage doing so.
   */
  readonly #shardKeys: readonly string[];
  readonly #hostKeys = new Map<string, string>();
  readonly #held = new Map<number, HeldShard>();
  readonly #draining = new Map<number, Promise<void>>();
  readonly #acquiring = new Map<number, Promise<LeaseFence>>();
  readonly #waiters = new Map<number, Set<() => void>>();
  /** The epoch of each shard this host released, until the watch shows a newer lease. */
  readonly #released = new Map<number, number>();
  readonly #now: () => number;
  #assignment: (string | undefined)[] = [];
  /** The live hosts the assignment was computed from, joined: it is recomputed when they change. */
  #assignedFrom: string | undefined;
  /** Fires when the next other host's lease runs out (expiry + skew), see {@link #followHostLeases}. */
  #expiryTimer: NodeJS.Timeout | undefined;
  /** Per host, the last of its lease's epochs known dead (run out and taken over, or superseded): its shards under them need no re-read. */
  readonly #evicted = new Map<string, number>();
  /** Takeovers of a dead host's lease under way, by `<host>@<epoch>`. */
  readonly #evicting = new Map<string, Promise<"free" | "again">>();
  #timer: NodeJS.Timeout | undefined;
  #releaseFailures: { shards: number[]; reason: string } | undefined;
  #releaseFailureTimer: NodeJS.Timeout | undefined;
  #balancing: Promise<void> | undefined;
  #joining: Promise<LeaseFence> | undefined;
  #isLeaving = false;

  private constructor(options: ShardKeeperOptions, store: SessionLeaseStore, kv: KV) {
    this.#options = options;
    this.#shardAgent = shardKeyAgent(options.agents);
    this.shardCount = options.shardCount;
    this.#shardKeys = Array.from(
      { length: options.shardCount },
      (_, shard) => `${this.#shardAgent}.${shard}`,
    );
    this.hostId = options.hostId;
    this.#store = store;
    this.#kv = kv;
    this.#now = options.now ?? Date.now;
    this.#hostLease = hostLeaseFor(options, store, (reason) =>
      this.#loseAll(`this host's lease was lost: ${reason}`),
    );
    this.#table = new WatchedBucket<LeaseRecord>(
      (entry) => {
        const parsed = LeaseRecord.safeParse(entryJson(entry));
        return parsed.success ? parsed.data : undefined;
      },
      (key) => {
        if (key.startsWith(`${this.#shardAgent}.`)) {
          this.#wake(Number(key.slice(this.#shardAgent.length + 1)));
          return;
        }
        for (const shard of [...this.#waiters.keys()]) this.#wake(shard);
        if (key.startsWith(HOST_KEY_PREFIX)) {
          this.#hostKeys.set(key.slice(HOST_KEY_PREFIX.length), key);
          this.#followHostLeases();
        }
      },
    );
  }

  /** The table key of a host's lease. */
  #hostKey(host: string): string {
    let key = this.#hostKeys.get(host);
    if (key === undefined) {
      key = `${HOST_KEY_PREFIX}${host}`;
      this.#hostKeys.set(host, key);
    }
    return key;
  }

  /** Opens the shard bucket and its watch and takes this host's lease; balancing starts with {@link start}. */
  static async open(options: ShardKeeperOptions): Promise<ShardKeeper> {
    const bucket = shardsBucketName(options.prefix);
    const store = await SessionLeaseStore.open(options.connection, {
      bucket,
      timing: options.timing,
      ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
    });
    const kv = await new Kvm(options.connection).open(bucket);
    const keeper = new ShardKeeper(options, store, kv);
    await keeper.#table.start(kv, await listKvKeys(options.connection, bucket));
    await keeper.#join();
    return keeper;
  }

  /**
   * Starts balancing: at once, on every membership change, the moment another host's lease runs
   * out, and every TTL/10 (at most 1 s).
   */
  start(): void {
    this.#timer = setInterval(() => this.#balance(), Math.min(1_000, this.#options.timing.ttlMs / 10));
    this.#timer.unref();
    this.membershipChanged();
    this.#followHostLeases();
  }

  /** The members changed: the preferred owners are computed again and the balancer runs. */
  membershipChanged(): void {
    this.#refreshAssignment();
    for (const shard of [...this.#waiters.keys()]) this.#wake(shard);
    this.#balance();
  }

  /**
   * Whether `host` counts as a live member: its heartbeat is live and its lease (when it has one
   * yet) has not run out. A killed host's heartbeat outlives it by up to a TTL; its lease is what
   * its shards live by, so that is what decides as soon as it runs out.
   */
  #isLive(host: string): boolean {
    if (this.#options.membership.liveMember(host) === undefined) return false;
    if (host === this.hostId) return true;
    const lease = this.#table.valueOf(this.#hostKey(host));
    if (lease === undefined) return true;
    return lease.host === host && !isLeaseFree(lease, "", this.#now(), this.#options.timing);
  }

  /** Computes the preferred owners again when the live hosts changed (always when `force`). */
  #refreshAssignment(): void {
    const members = this.#options.membership
      .live()
      .filter(
        (member) => this.#options.agents === undefined || isSameAgentSet(member.agents, this.#options.agents),
      )
      .map((member) => member.host)
      .filter((host) => this.#isLive(host));
    const key = members.join(",");
    if (key === this.#assignedFrom) return;
    this.#assignedFrom = key;
    this.#assignment = Array.from({ length: this.shardCount }, (_, shard) => preferredOwner(shard, members));
  }

  /**
   * Follows the other hosts' leases (the watch brings every renewal): a timer fires the moment the
   * first of them runs out, and then the shards of that host prefer the live ones and are taken in
   * one balancer pass, instead of waiting for its heartbeat to expire or for the next poll.
   */
  #followHostLeases(): void {
    clearTimeout(this.#expiryTimer);
    this.#expiryTimer = undefined;
    if (this.#isLeaving || this.#timer === undefined) return;
    const now = this.#now();
    let next = Number.POSITIVE_INFINITY;
    let hasLapsed = false;
    // Only the hosts' leases: the shards' would be a thousand entries looked at on every renewal.
    for (const [host, key] of this.#hostKeys) {
      const value = this.#table.valueOf(key);
      if (value === undefined || host === this.hostId || value.released === true) continue;
      if (value.host !== host) continue;
      const freeAt = value.expiresAt + this.#options.timing.skewMs;
      if (freeAt < now) hasLapsed = true;
      else next = Math.min(next, freeAt);
    }
    const before = this.#assignedFrom;
    this.#refreshAssignment();
    if (hasLapsed || before !== this.#assignedFrom) {
      for (const shard of [...this.#waiters.keys()]) this.#wake(shard);
      this.#balance();
    }
    if (next === Number.POSITIVE_INFINITY) return;
    this.#expiryTimer = setTimeout(() => this.#followHostLeases(), next - now + 1);
    this.#expiryTimer.unref?.();
  }

  shardOf(agent: string, session: string): number {
    return shardOf(agent, session, this.shardCount);
  }

  /** The shards this host holds now. */
  get heldCount(): number {
    return this.#hostFence() === undefined ? 0 : this.#held.size;
  }

  /** True while this host holds the shard and is not handing it over. */
  isServing(shard: number): boolean {
    return !this.#draining.has(shard) && this.#holds(shard);
  }

  /** True while the shard is being handed over from this host. */
  isDraining(shard: number): boolean {
    return this.#draining.has(shard);
  }

  /** The shard's fence, while this host holds it. */
  fenceOf(shard: number): LeaseFence | undefined {
    return this.#holds(shard) ? this.#held.get(shard) : undefined;
  }

  /**
   * The live lease of the shard as the map shows it (another host's, or this one's), its
   * `expiresAt` that of its host's lease; undefined when nobody holds it now.
   */
  leaseOf(shard: number): LeaseRecord | undefined {
    const host = this.#liveLeaseHost(shard);
    if (host === undefined) return undefined;
    const record = this.#table.valueOf(this.#shardKeys[shard] ?? "") as LeaseRecord;
    return { ...record, expiresAt: host.expiresAt, renewedAt: host.renewedAt };
  }

  /**
   * The lease of the host holding the shard, when the shard's lease is live (see {@link leaseOf}).
   * `hostLease`: a host's lease when it is live (default: read now; the balancer passes one that
   * reads each host once per pass, not once per shard).
   */
  #liveLeaseHost(
    shard: number,
    hostLease: (host: string) => LeaseRecord | undefined = (host) => this.#liveHostLease(host, this.#now()),
  ): LeaseRecord | undefined {
    const record = this.#table.valueOf(this.#shardKeys[shard] ?? `${this.#shardAgent}.${shard}`);
    if (record === undefined || record.released === true) return undefined;
    if (record.host === this.hostId && record.epoch <= (this.#released.get(shard) ?? -1)) return undefined;
    const host = hostLease(record.host);
    return host !== undefined && host.epoch === record.hostEpoch ? host : undefined;
  }

  /** The lease of `host` when it is live at `now`. */
  #liveHostLease(host: string, now: number): LeaseRecord | undefined {
    const lease = this.#table.valueOf(this.#hostKey(host));
    if (lease === undefined || lease.host !== host) return undefined;
    return isLeaseFree(lease, "", now, this.#options.timing) ? undefined : lease;
  }

  /** Whether this host may take the free shard now (it prefers this host, or its preferred one is gone). */
  mayTake(shard: number, options: { isForwarded?: boolean } = {}): boolean {
    if (options.isForwarded === true) return !this.#isLeaving;
    return this.#mayTake(shard, (host) => this.#isLive(host));
  }

  /** {@link mayTake} of a request that was not forwarded, with `isLive` telling which hosts are. */
  #mayTake(shard: number, isLive: (host: string) => boolean): boolean {
    if (this.#isLeaving) return false;
    let preferred = this.#assignment[shard];
    if (preferred !== undefined && preferred !== this.hostId && !isLive(preferred)) {
      // The preferred host just died: the live hosts' preference decides, not whoever asks first.
      this.#refreshAssignment();
      preferred = this.#assignment[shard];
    }
    return preferred === undefined || preferred === this.hostId || !isLive(preferred);
  }

  /** Where requests for `shard` go now, without I/O. */
  place(shard: number, options: { isForwarded?: boolean } = {}): ShardPlace {
    if (this.#draining.has(shard)) return { where: "changing", shard, reason: "it is being handed over" };
    if (this.#holds(shard)) return { where: "here", shard };
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
    const member =
      preferred === undefined || !this.#isLive(preferred)
        ? undefined
        : this.#options.membership.liveMember(preferred);
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
    const acquiring = this.#take(shard).finally(() => {
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
    clearTimeout(this.#expiryTimer);
  }

  /**
   * The host shuts down: drains and releases every shard it holds, as at a hand-over (requests
   * for them wait meanwhile, then go to the shards' next owners). Resolves when all are released.
   */
  async handOverAll(): Promise<void> {
    this.#isLeaving = true;
    for (const shard of [...this.#held.keys()]) {
      if (!this.#draining.has(shard)) this.#handOver(shard);
    }
    await Promise.allSettled([...this.#draining.values()]);
  }

  /** Stops balancing and releases every shard still held and this host's lease (after the sessions stopped). */
  async close(): Promise<void> {
    this.#isLeaving = true;
    clearInterval(this.#timer);
    this.#timer = undefined;
    clearTimeout(this.#expiryTimer);
    await this.#balancing?.catch(() => {});
    await Promise.allSettled([...this.#acquiring.values()]);
    await Promise.allSettled([...this.#draining.values()]);
    await Promise.allSettled([...this.#held.keys()].map((shard) => this.#release(shard)));
    this.#logReleaseFailures();
    await this.#hostLease.close();
    this.#table.close();
  }

  #hostFence(): LeaseFence | undefined {
    return this.#hostLease.fence();
  }

  #holds(shard: number): boolean {
    const held = this.#held.get(shard);
    return held !== undefined && isHeld(held);
  }

  /** Takes (again) this host's lease: a new epoch, under which shards are taken. */
  #join(): Promise<LeaseFence> {
    this.#joining ??= this.#hostLease.acquire().finally(() => {
      this.#joining = undefined;
    });
    return this.#joining;
  }

  /** This host's lease is gone: so is every shard it held. */
  #loseAll(reason: string): void {
    for (const [shard, held] of [...this.#held]) {
      held.lostReason = reason;
      this.#held.delete(shard);
      this.#wake(shard);
      this.#options.onLost(shard, reason);
    }
  }

  async #take(shard: number): Promise<LeaseFence> {
    if (this.#draining.has(shard) || this.#isLeaving) {
      throw new LeaseLostError(`this host is handing shard ${shard} over`, 0);
    }
    const hostFence = this.#hostFence() ?? (await this.#join());
    const hostRecord = this.#table.valueOf(this.#hostKey(this.hostId));
    const hostEpoch = hostFence.epoch ?? hostRecord?.epoch;
    const key = `${this.#shardAgent}.${shard}`;
    for (let attempt = 0; attempt < 5; attempt++) {
      hostFence.assertHeld();
      const entry = await this.#kv.get(key);
      let current: LeaseRecord | undefined;
      if (entry !== null && entry.operation === "PUT") {
        const parsed = LeaseRecord.safeParse(entryJson(entry));
        if (parsed.success) current = parsed.data;
      }
      const isOwnNow =
        current?.host === this.hostId && current.hostEpoch === hostEpoch && current.released !== true;
      if (current !== undefined && current.released !== true && !isOwnNow && current.host !== this.hostId) {
        const evictedEpoch = this.#evicted.get(current.host);
        // Its host's lease at this epoch or a later one was found run out and taken over here: the
        // shard is free without reading that lease again (one dead host's shards, one read).
        const isEvicted = evictedEpoch !== undefined && (current.hostEpoch ?? 0) <= evictedEpoch;
        if (!isEvicted && (await this.#evictOwner(current, shard)) === "again") continue;
      }
      const now = this.#now();
      const record: LeaseRecord = {
        host: this.hostId,
        hostEpoch,
        epoch: (current?.epoch ?? 0) + 1,
        acquiredAt: now,
        renewedAt: now,
        expiresAt: now,
        ttlMs: this.#options.timing.ttlMs,
        subject: this.#options.subject,
      };
      let revision: number;
      try {
        revision =
          entry === null
            ? await this.#kv.create(key, JSON.stringify(record))
            : await this.#kv.update(key, JSON.stringify(record), entry.revision);
      } catch (error) {
        if (isConflict(error)) continue;
        throw error;
      }
      const held = new HeldShard(shard, record, revision, hostFence);
      this.#held.set(shard, held);
      this.#table.note(key, record, revision);
      return held;
    }
    throw new LeaseLostError(`shard ${shard} kept changing while this host tried to take it`, 0);
  }

  /**
   * The shard's record names another host: when that host's lease, at the record's epoch, is still
   * its own, it must have run out (else SessionOwnedElsewhereError) and is taken over here (its
   * next renewal then fails) and let go. "again": the lease changed meanwhile, read the shard again.
   */
  async #evictOwner(current: LeaseRecord, shard: number): Promise<"free" | "again"> {
    const owner = await this.#store.read(HOST_AGENT, current.host);
    const ownerRecord = owner?.record;
    if (ownerRecord === undefined || owner === undefined) return "free";
    const isOwnersOwn = ownerRecord.host === current.host && ownerRecord.released !== true;
    if (!isOwnersOwn || ownerRecord.epoch !== current.hostEpoch) {
      // Rewritten since the shard was taken under it (taken over, released, or a new incarnation of
      // that host): every incarnation before the one stored now is dead, and so is a released one.
      this.#noteDead(current.host, isOwnersOwn ? ownerRecord.epoch - 1 : ownerRecord.epoch);
      return "free";
    }
    if (!isLeaseFree(ownerRecord, this.hostId, this.#now(), this.#options.timing)) {
      throw new SessionOwnedElsewhereError(this.#shardAgent, String(shard), {
        ...current,
        expiresAt: ownerRecord.expiresAt,
      });
    }
    // Many of the dead host's shards are taken at once: its lease is taken over once.
    const key = `${current.host}@${ownerRecord.epoch}`;
    let evicting = this.#evicting.get(key);
    if (evicting === undefined) {
      evicting = (async () => {
        try {
          const evicted = await this.#store.acquire(HOST_AGENT, current.host, this.hostId);
          await this.#store.release(evicted);
          this.#noteDead(current.host, ownerRecord.epoch);
          return "free" as const;
        } catch (error) {
          if (error instanceof SessionOwnedElsewhereError) throw error;
          return "again" as const;
        }
      })().finally(() => this.#evicting.delete(key));
      this.#evicting.set(key, evicting);
    }
    return evicting;
  }

  /** Every incarnation of `host` up to `epoch` is known dead: shards taken under them are free. */
  #noteDead(host: string, epoch: number): void {
    if (epoch > (this.#evicted.get(host) ?? -1)) this.#evicted.set(host, epoch);
  }

  /** Gives the shard up (its epoch kept, so the next owner's is higher). */
  async #release(shard: number): Promise<void> {
    const held = this.#held.get(shard);
    if (held === undefined) return;
    this.#held.delete(shard);
    this.#released.set(shard, held.epoch);
    if (held.lostReason !== undefined) return;
    held.lostReason = "released";
    const record: LeaseRecord = { ...held.record, released: true, expiresAt: this.#now() };
    // A hand-over waits for its release (the next owner needs it); a shutdown waits a bounded time,
    // and not at all while disconnected (the write is queued for the reconnect).
    const isShuttingDown = this.#isLeaving;
    const writing = this.#kv
      .update(
        `${this.#shardAgent}.${shard}`,
        JSON.stringify(record),
        held.revision,
        ...(isShuttingDown ? [SHUTDOWN_RELEASE_WAIT_MS] : []),
      )
      .catch((error: unknown) => {
        // Taken over meanwhile (not ours to release any more), or NATS away: it lapses with this host's lease.
        if (!isConflict(error)) this.#noteReleaseFailure(shard, describeError(error));
      });
    if (!isShuttingDown) await writing;
    else await settlesWithin(writing, this.#options.isConnected?.() === false ? 0 : SHUTDOWN_RELEASE_WAIT_MS);
  }

  /** Failed releases are logged as one line per burst (NATS away at shutdown fails them all at once). */
  #noteReleaseFailure(shard: number, reason: string): void {
    this.#releaseFailures ??= { shards: [], reason };
    this.#releaseFailures.shards.push(shard);
    this.#releaseFailureTimer ??= setTimeout(() => this.#logReleaseFailures(), 100);
    this.#releaseFailureTimer.unref?.();
  }

  #logReleaseFailures(): void {
    clearTimeout(this.#releaseFailureTimer);
    this.#releaseFailureTimer = undefined;
    const failures = this.#releaseFailures;
    this.#releaseFailures = undefined;
    if (failures === undefined) return;
    const [first] = failures.shards;
    const which =
      failures.shards.length === 1
        ? `shard ${first}`
        : `${failures.shards.length} shards (${first} and others)`;
    this.#options.log?.(`could not release ${which}: ${failures.reason}; they lapse with this host's lease`);
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
    if (this.#isLeaving) return;
    // This host's lease lapsed (NATS away too long, a pause): take a new one before any shard.
    if (this.#hostFence() === undefined) await this.#join();
    const toTake: number[] = [];
    const toHand: number[] = [];
    // A pass looks at every shard, but only a few hosts: each host is judged once per pass (an idle
    // host then makes no garbage per shard: no clock reading, no record).
    const now = this.#now();
    const leases = new Map<string, LeaseRecord | undefined>();
    const hostLease = (host: string): LeaseRecord | undefined => {
      if (!leases.has(host)) leases.set(host, this.#liveHostLease(host, now));
      return leases.get(host);
    };
    const live = new Map<string, boolean>();
    const isLive = (host: string): boolean => {
      let answer = live.get(host);
      if (answer === undefined) {
        answer = this.#isLive(host);
        live.set(host, answer);
      }
      return answer;
    };
    // Held shards share their host's fence: its clock check, once per pass.
    const fences = new Map<LeaseFence, boolean>();
    const holds = (shard: number): boolean => {
      const held = this.#held.get(shard);
      if (held === undefined || held.lostReason !== undefined) return false;
      let answer = fences.get(held.host);
      if (answer === undefined) {
        answer = isHeld(held.host);
        fences.set(held.host, answer);
      }
      return answer;
    };
    for (let shard = 0; shard < this.shardCount; shard++) {
      if (this.#draining.has(shard) || this.#acquiring.has(shard)) continue;
      const preferred = this.#assignment[shard];
      if (holds(shard)) {
        const isPreferredElsewhere =
          preferred !== undefined && preferred !== this.hostId && isLive(preferred);
        if (isPreferredElsewhere) toHand.push(shard);
      } else if (this.#liveLeaseHost(shard, hostLease) === undefined && this.#mayTake(shard, isLive)) {
        toTake.push(shard);
      }
    }
    for (const shard of toHand) this.#handOver(shard);
    await inBatches(toTake, PARALLEL_MOVES, async (shard) => {
      if (this.leaseOf(shard) !== undefined || this.#holds(shard)) return;
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
        await this.#release(shard);
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

/**
 * This host's lease: on a thread of its own when asked for and its code is there, else on the main
 * thread. Either way a renewal slower than its interval is logged with the event loop's delay
 * around it (the renewing thread's), so a stalled host is told from a slow server.
 */
function hostLeaseFor(
  options: ShardKeeperOptions,
  store: SessionLeaseStore,
  onLost: (reason: string) => void,
): HostLease {
  const renewEveryMs = options.timing.ttlMs / HOST_RENEWALS_PER_TTL;
  const log = options.log ?? (() => {});
  const workerUrl = options.leaseThread?.workerUrl ?? HOST_LEASE_WORKER_URL;
  if (options.leaseThread !== undefined && hostLeaseWorkerExists(workerUrl)) {
    const thread = new HostLeaseThread({
      connect: options.leaseThread.connect,
      bucket: shardsBucketName(options.prefix),
      ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
      timing: options.timing,
      hostId: options.hostId,
      subject: options.subject,
      agent: HOST_AGENT,
      renewEveryMs,
      workerUrl,
      onLost,
      log,
    });
    return { acquire: () => thread.acquire(), fence: () => thread.fence(), close: () => thread.close() };
  }
  // Run from the TypeScript sources there is no compiled thread code: expected, not worth a notice.
  if (options.leaseThread !== undefined && !import.meta.url.endsWith(".ts")) {
    log(
      `the host lease thread's code is missing (${workerUrl.href}): this host's lease is renewed on the main thread`,
    );
  }
  const renewals = new RenewalWatch();
  const keeper = new LeaseKeeper({
    store,
    hostId: options.hostId,
    subject: options.subject,
    onLost: (_agent, _host, reason) => onLost(`${reason} (${renewals.describe()})`),
    onRenewal: (tookMs, isRenewed) => {
      if (tookMs > renewEveryMs) {
        log(
          `this host's lease renewal ${isRenewed ? "took" : "failed after"} ${Math.round(tookMs)} ms (${renewals.describe()})`,
        );
      }
      renewals.renewed(tookMs, isRenewed);
    },
    renewEveryMs,
    ...(options.isConnected === undefined ? {} : { isConnected: options.isConnected }),
    ...(options.log === undefined ? {} : { log: options.log }),
  });
  return {
    acquire: () => keeper.acquire(HOST_AGENT, options.hostId),
    fence: () => keeper.fenceOf(HOST_AGENT, options.hostId),
    close: async () => {
      await keeper.close();
      renewals.close();
    },
  };
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

/** Whether the fence holds (its `assertHeld` does not throw). */
function isHeld(fence: LeaseFence): boolean {
  try {
    fence.assertHeld();
    return true;
  } catch {
    return false;
  }
}
