import { type KV, Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { z } from "zod";
import { jetStreamName } from "../bus/subjects.js";
import { ConfigurationError } from "../errors/configuration-error.js";
import { describeError } from "../errors/describe-error.js";
import { SHUTDOWN_WAIT_MS, settlesWithin } from "./bounded-wait.js";
import { listKvKeys } from "./kv-keys.js";
import type { LeaseTiming } from "./session-lease.js";
import { entryJson, WatchedBucket } from "./watched-bucket.js";

/** One host's heartbeat in the members bucket (key: the host id). Times: the writer's clock. */
export const MemberRecord = z.object({
  host: z.string(),
  /** Where other hosts forward requests to it: `<prefix>.hosts.<host>`. */
  subject: z.string(),
  /** Its `--shards`: every host of a system must have the same. */
  shards: z.number().int().positive(),
  startedAt: z.number(),
  renewedAt: z.number(),
  expiresAt: z.number(),
  /** Set while it shuts down: it takes no shards and hands its own over. */
  leaving: z.boolean().optional(),
  /**
   * The agents it serves, sorted. Hosts serving the same agents share one set of shards; hosts on
   * one prefix serve the same agents or none in common.
   */
  agents: z.array(z.string()).optional(),
});
export type MemberRecord = z.infer<typeof MemberRecord>;

/** `AGENTLOOP_MEMBERS` for the default prefix. */
export function membersBucketName(prefix: string): string {
  return jetStreamName(prefix, "MEMBERS");
}

/** A host started with a `--shards` other than the live hosts': the shard of a session would differ. */
export class ShardCountMismatchError extends ConfigurationError {
  constructor(own: number, other: MemberRecord) {
    super(
      `--shards ${own} differs from host ${other.host}'s --shards ${other.shards}: every host on one NATS system must use the same shard count`,
    );
  }
}

/**
 * A host serving some but not all of the agents another live host serves: a session of a shared
 * agent could belong to either's shards, so it could run on two hosts at once.
 */
export class AgentSetOverlapError extends ConfigurationError {
  constructor(own: readonly string[], other: MemberRecord) {
    super(
      `this host serves ${own.join(", ")} and host ${other.host} serves ${(other.agents ?? []).join(", ")}: hosts on one NATS system and prefix must serve the same agents, or agents none of the others serve`,
    );
  }
}

/** Whether two hosts' agents (sorted) are the same set. */
export function isSameAgentSet(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  return (a ?? []).join(",") === (b ?? []).join(",");
}

export interface MembershipOptions {
  connection: NatsConnection;
  prefix: string;
  hostId: string;
  subject: string;
  shardCount: number;
  /** The agents this host serves, sorted (see {@link MemberRecord.agents}). */
  agents?: readonly string[];
  timing: LeaseTiming;
  replicas?: number;
  /** Called whenever the set of live members may have changed. */
  onChange?: () => void;
  log?: (line: string) => void;
  now?: () => number;
  /** Whether the connection is up now (see {@link ShardKeeperOptions.isConnected}). */
  isConnected?: () => boolean;
}

/**
 * Hosts announce themselves: each writes its {@link MemberRecord} every TTL/3 and watches
 * everyone's. A member is live while its record is not past its expiry and it is not leaving. The
 * cost is one write per host per TTL/3, whatever the number of shards or sessions.
 */
export class Membership {
  readonly #options: MembershipOptions;
  readonly #kv: KV;
  readonly #members: WatchedBucket<MemberRecord>;
  readonly #now: () => number;
  readonly #startedAt: number;
  #timer: NodeJS.Timeout | undefined;
  #isLeaving = false;

  private constructor(options: MembershipOptions, kv: KV) {
    this.#options = options;
    this.#kv = kv;
    this.#now = options.now ?? Date.now;
    this.#startedAt = this.#now();
    this.#members = new WatchedBucket<MemberRecord>(
      (entry) => {
        const parsed = MemberRecord.safeParse(entryJson(entry));
        return parsed.success ? parsed.data : undefined;
      },
      () => options.onChange?.(),
    );
  }

  /**
   * Opens the bucket, reads who is there, refuses to start when a live host has another shard
   * count ({@link ShardCountMismatchError}), announces this host and keeps announcing it.
   */
  static async join(options: MembershipOptions): Promise<Membership> {
    const name = membersBucketName(options.prefix);
    const kv = await new Kvm(options.connection).create(name, {
      history: 1,
      // Records of hosts gone for an hour leave the bucket.
      ttl: 60 * 60 * 1000,
      replicas: options.replicas ?? 1,
    });
    const membership = new Membership(options, kv);
    await membership.#members.start(kv, await listKvKeys(options.connection, name));
    for (const other of membership.live()) {
      if (other.host !== options.hostId && other.shards !== options.shardCount) {
        membership.close();
        throw new ShardCountMismatchError(options.shardCount, other);
      }
      const own = options.agents ?? [];
      const shared = own.some((agent) => other.agents?.includes(agent) === true);
      if (other.host !== options.hostId && shared && !isSameAgentSet(own, other.agents)) {
        membership.close();
        throw new AgentSetOverlapError(own, other);
      }
    }
    await membership.#announce();
    membership.#timer = setInterval(() => void membership.#beat(), options.timing.ttlMs / 3);
    membership.#timer.unref();
    return membership;
  }

  /** The live members, this host included while it is not leaving, sorted by id. */
  live(): MemberRecord[] {
    const now = this.#now();
    const members: MemberRecord[] = [];
    for (const [, { value }] of this.#members.entries()) {
      if (value.leaving !== true && now <= value.expiresAt) members.push(value);
    }
    return members.sort((a, b) => (a.host < b.host ? -1 : a.host > b.host ? 1 : 0));
  }

  /** The record of `host`, if it is live. */
  liveMember(host: string): MemberRecord | undefined {
    const record = this.#members.valueOf(host);
    return record !== undefined && record.leaving !== true && this.#now() <= record.expiresAt
      ? record
      : undefined;
  }

  /** This host shuts down: says so (others stop sending it shards), then keeps beating until {@link close}. */
  async leave(): Promise<void> {
    this.#isLeaving = true;
    await settlesWithin(this.#announce(SHUTDOWN_WAIT_MS), this.#shutdownWaitMs());
  }

  /** Stops beating and removes this host's record (it expires anyway if that fails). */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#members.close();
    await settlesWithin(this.#kv.delete(this.#options.hostId), this.#shutdownWaitMs());
  }

  /** How long a goodbye may take: not at all while the connection is down (it is queued for the reconnect). */
  #shutdownWaitMs(): number {
    return this.#options.isConnected?.() === false ? 0 : SHUTDOWN_WAIT_MS;
  }

  async #beat(): Promise<void> {
    try {
      await this.#announce();
    } catch (error) {
      this.#options.log?.(`could not renew this host's membership: ${describeError(error)}`);
    }
  }

  async #announce(timeoutMs = this.#options.timing.ttlMs / 3): Promise<void> {
    const { hostId, subject, shardCount, timing } = this.#options;
    const now = this.#now();
    const record: MemberRecord = {
      host: hostId,
      subject,
      shards: shardCount,
      startedAt: this.#startedAt,
      renewedAt: now,
      expiresAt: now + timing.ttlMs,
      ...(this.#isLeaving ? { leaving: true } : {}),
      ...(this.#options.agents === undefined ? {} : { agents: [...this.#options.agents] }),
    };
    const revision = await this.#kv.put(hostId, JSON.stringify(record), { timeout: timeoutMs });
    this.#members.note(hostId, record, revision);
  }
}
