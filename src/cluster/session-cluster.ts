import { JetStreamApiError } from "@nats-io/jetstream";
import { jserrors } from "@nats-io/jetstream/internal";
import type { NatsConnection } from "@nats-io/transport-node";
import type { BusMessage } from "../bus/bus.js";
import { errorReply } from "../bus/contract.js";
import {
  CREATION_RACE_TRIES,
  isClusterFormingError,
  isCreationRaceError,
  isTransientNatsError,
} from "../bus/jetstream-retry.js";
import { NatsPermissionError, permissionDenialOf } from "../bus/nats-permission-error.js";
import { NAME_PATTERN, type RequestVerb } from "../bus/subjects.js";
import { describeError } from "../errors/describe-error.js";
import { sleep } from "../timers/sleep.js";
import type { LeaseFence } from "./lease-fence.js";
import { AgentSetOverlapError, Membership, ShardCountMismatchError } from "./membership.js";
import { answersProbe, passOnRequest, SharedProbes } from "./pass-on.js";
import { RequestDedupe } from "./request-dedupe.js";
import { type LeaseRecord, type LeaseTiming, SessionOwnedElsewhereError } from "./session-lease.js";
import { ShardKeeper, type ShardKeeperOptions } from "./shard-keeper.js";
import { DEFAULT_SHARD_COUNT } from "./shard-map.js";

/** How many times one request may be forwarded between hosts before it is refused. */
export const MAX_FORWARD_HOPS = 3;

/** How long a probe of the owner may take before it counts as alive (slow, not gone). */
const PROBE_TIMEOUT_MS = 2_000;
/** How long an owner that answered a probe counts as reachable for the requests forwarded to it (see {@link SharedProbes}). */
const PROBE_FRESH_MS = 250;

/** A forwarded request that finds the map naming another owner waits this long for news first. */
const MAP_LAG_MS = 250;

/** The header counting a forwarded request's hops. */
export const FORWARD_HOPS_HEADER = "Agentloop-Forward-Hops";

/** `<prefix>.hosts.<hostId>`: where a host takes the requests other hosts forward to it. */
export function hostSubject(prefix: string, hostId: string): string {
  return `${prefix}.hosts.${hostId}`;
}

/** A host id usable as one subject token; anything else is replaced by `_`. */
export function toHostToken(hostId: string): string {
  const token = hostId.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64);
  return NAME_PATTERN.test(token) ? token : "host";
}

export interface SessionClusterOptions {
  /** The host's connection: forwarding, probes and stored replies. */
  connection: NatsConnection;
  /**
   * A connection of its own for lease upkeep (this host's lease, the shard leases, the membership
   * heartbeats and their watches), so a renewal never waits behind the journal, history and event
   * traffic of a busy host. Default: `connection`.
   */
  leaseConnection?: NatsConnection;
  /**
   * Renew this host's own lease on a worker thread with a connection of its own, made with these
   * settings (the host's): a main event loop stalled by load then cannot make it lapse. Default: on
   * the main thread, over the lease connection.
   */
  leaseThread?: ShardKeeperOptions["leaseThread"];
  prefix: string;
  /** This host's id; must be one subject token (see {@link toHostToken}). */
  hostId: string;
  timing: LeaseTiming;
  /** `--shards`: sessions are spread over this many shards; equal on every host (default 1024). */
  shardCount?: number;
  /**
   * The agents this host serves. Hosts serving the same agents share shards; a host serving
   * other agents has shards of its own, so a session is always owned by a host that serves its agent.
   */
  agents?: readonly string[];
  /** `--dedupe-window`. */
  dedupeWindowMs?: number;
  /** `--js-replicas`: replicas of the shard, member and reply buckets when they are created. */
  replicas?: number;
  log?: (line: string) => void;
}

/** A request forwarded to its session's owner: the owner answers the requester directly. */
export const FORWARDED = { ok: true } as const;

/** Where a request goes, as {@link SessionCluster.locate} decided. */
export type Location =
  | { where: "here"; shard: number; fence: LeaseFence }
  | { where: "forward"; shard: number; host: string; subject: string }
  | { where: "unavailable"; reason: string };

/**
 * What makes several hosts on one NATS system act as one, bundled for the agent host. Sessions
 * belong to shards (a stable hash of agent and session, `--shards` of them); hosts own shards
 * through shard leases ({@link ShardKeeper}), announce themselves ({@link Membership}) and spread
 * the shards over the live members. The {@link RequestDedupe} answers a request id once. Hosts
 * share the queue group on `<prefix>.agents.<agent>.<verb>`; a request for a session of a shard
 * another host owns is re-published on the owner's `<prefix>.hosts.<owner>.agents.<agent>.<verb>`
 * with the requester's reply subject, so the owner answers the requester itself.
 */
export class SessionCluster {
  readonly hostId: string;
  readonly shards: ShardKeeper;
  readonly membership: Membership;
  readonly dedupe: RequestDedupe;
  readonly timing: LeaseTiming;
  readonly #connection: NatsConnection;
  readonly #probes: SharedProbes;
  readonly #prefix: string;
  #onShardLost: (shard: number, reason: string) => void = () => {};
  #drain: (shard: number) => Promise<void> = async () => {};

  private constructor(
    options: SessionClusterOptions,
    membership: Membership,
    shards: ShardKeeper,
    dedupe: RequestDedupe,
  ) {
    this.hostId = options.hostId;
    this.timing = options.timing;
    this.#connection = options.connection;
    this.#probes = new SharedProbes(
      (subject) => answersProbe(this.#connection, subject, PROBE_TIMEOUT_MS),
      PROBE_FRESH_MS,
    );
    this.#prefix = options.prefix;
    this.membership = membership;
    this.shards = shards;
    this.dedupe = dedupe;
  }

  /**
   * Joins the members, opens (creating if needed) the shard and reply buckets and starts balancing.
   * @throws ShardCountMismatchError when a live host has another `--shards`.
   * @throws when JetStream is not available on the server.
   */
  static async start(options: SessionClusterOptions): Promise<SessionCluster> {
    if (!NAME_PATTERN.test(options.hostId)) {
      throw new RangeError(`the host id must be one subject token of [A-Za-z0-9_-], got "${options.hostId}"`);
    }
    const shardCount = options.shardCount ?? DEFAULT_SHARD_COUNT;
    const agents = options.agents === undefined ? undefined : [...new Set(options.agents)].sort();
    const subject = hostSubject(options.prefix, options.hostId);
    let cluster: SessionCluster | undefined;
    // Lease upkeep goes on its own connection when there is one.
    const upkeep = options.leaseConnection ?? options.connection;
    // Followed so that a shutdown with the server gone does not wait on writes that cannot land.
    let isConnected = true;
    void (async () => {
      for await (const status of upkeep.status()) {
        if (status.type === "disconnect") isConnected = false;
        else if (status.type === "reconnect") isConnected = true;
      }
    })().catch(() => {
      // The status stream ends with the connection.
    });
    const connected = () => isConnected && !upkeep.isClosed();
    const membership = await Membership.join({
      connection: upkeep,
      prefix: options.prefix,
      hostId: options.hostId,
      subject,
      shardCount,
      ...(agents === undefined ? {} : { agents }),
      timing: options.timing,
      isConnected: connected,
      ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
      onChange: () => cluster?.shards.membershipChanged(),
      ...(options.log === undefined ? {} : { log: options.log }),
    });
    try {
      const shards = await ShardKeeper.open({
        connection: upkeep,
        prefix: options.prefix,
        hostId: options.hostId,
        subject,
        shardCount,
        ...(agents === undefined ? {} : { agents }),
        timing: options.timing,
        isConnected: connected,
        membership,
        ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
        ...(options.leaseThread === undefined ? {} : { leaseThread: options.leaseThread }),
        drain: (shard) => (cluster === undefined ? Promise.resolve() : cluster.#drain(shard)),
        onLost: (shard, reason) => {
          if (cluster !== undefined) cluster.#onShardLost(shard, reason);
        },
        ...(options.log === undefined ? {} : { log: options.log }),
      });
      const dedupe = await RequestDedupe.open(options.connection, {
        prefix: options.prefix,
        hostId: options.hostId,
        ...(options.dedupeWindowMs === undefined ? {} : { windowMs: options.dedupeWindowMs }),
        ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
        ...(options.log === undefined ? {} : { log: options.log }),
      });
      cluster = new SessionCluster(options, membership, shards, dedupe);
      shards.start();
      return cluster;
    } catch (error) {
      await membership.close();
      throw error;
    }
  }

  /**
   * {@link start}, telling an answer from silence. When JetStream is not enabled, or answers the
   * bucket requests with an error (a full account, say), resolves `{ unavailable: reason }`: the
   * host runs alone, as before. A timeout or a lost connection is retried until `retryForMs`
   * (default 30 s) has passed, then thrown (a refused permission is thrown at once, as a
   * NatsPermissionError naming the subject; a shard count other than the live hosts' too): giving
   * up on the first one would start a host of a cluster without leases, next to hosts that have them.
   */
  static async startOrExplain(
    options: SessionClusterOptions,
    retry: { retryForMs?: number; delayMs?: number } = {},
  ): Promise<SessionCluster | { unavailable: string }> {
    const deadline = Date.now() + (retry.retryForMs ?? 30_000);
    let races = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        return await SessionCluster.start(options);
      } catch (error) {
        // The server refused a subject: its answer, not a timeout, and it will not change by waiting.
        const denial = permissionDenialOf(error);
        if (denial !== undefined) throw new NatsPermissionError([denial], options.prefix);
        if (error instanceof ShardCountMismatchError || error instanceof AgentSetOverlapError) throw error;
        const reason = describeError(error);
        // The server answered (JetStream is off, or refused the request): trying again will not help —
        // unless the answer is "not yet" (a cluster whose servers have not all joined, JetStream
        // restarting), which is waited out like silence.
        // So is another host creating the same buckets at this moment (a few tries only).
        if (isCreationRaceError(error)) races++;
        const isNotYet =
          isClusterFormingError(error) ||
          isTransientNatsError(error) ||
          (isCreationRaceError(error) && races <= CREATION_RACE_TRIES);
        const answered =
          error instanceof jserrors.JetStreamNotEnabled || (error instanceof JetStreamApiError && !isNotYet);
        if (answered) return { unavailable: reason };
        if (error instanceof RangeError || Date.now() >= deadline) throw error;
        options.log?.(`session leases: attempt ${attempt} failed (${reason}); trying again`);
        await sleep(Math.min(5_000, (retry.delayMs ?? 500) * attempt));
      }
    }
  }

  /** Who stops the sessions of a shard whose lease is lost (the host). */
  onShardLost(handler: (shard: number, reason: string) => void): void {
    this.#onShardLost = handler;
  }

  /** Who drains a shard before it is handed over (the host: see {@link ShardKeeperOptions.drain}). */
  onDrain(drain: (shard: number) => Promise<void>): void {
    this.#drain = drain;
  }

  /** The shard of a session. */
  shardOf(agent: string, session: string): number {
    return this.shards.shardOf(agent, session);
  }

  /** `<prefix>.hosts.<hostId>.agents.*.*`: the forwarded requests this host takes. */
  get forwardedPattern(): string {
    return `${hostSubject(this.#prefix, this.hostId)}.agents.*.*`;
  }

  /** A forwarded request as if it had come on `<prefix>.agents.<agent>.<verb>` (headers kept). */
  asAgentRequest(message: BusMessage): BusMessage {
    const head = `${hostSubject(this.#prefix, this.hostId)}.`;
    return { ...message, subject: `${this.#prefix}.${message.subject.slice(head.length)}` };
  }

  /**
   * Where a request for the session goes, from the cached shard map (no KV read unless the shard
   * is taken here): here (the shard held, its fence returned), forwarded to the host holding the
   * shard (or preferring it, when free), or — when nothing settles within a lease's TTL plus the
   * skew and a margin — unavailable (retryable). A shard whose owner is gone (killed: no answer to
   * a probe) waits here until its lease runs out, then is taken; one being handed over waits until
   * it is released. `hops`: how often the request was forwarded already.
   */
  async locate(agent: string, session: string, hops = 0, probeSubject?: string): Promise<Location> {
    const shard = this.shards.shardOf(agent, session);
    const { ttlMs, skewMs } = this.timing;
    const deadline = Date.now() + ttlMs + skewMs + 2_000;
    let hasWaitedForMap = false;
    for (;;) {
      const remaining = deadline - Date.now();
      if (remaining <= 0) {
        return {
          where: "unavailable",
          reason: `no host could take session ${agent}/${session} (shard ${shard}) in time; retry the request`,
        };
      }
      const place = this.shards.place(shard, { isForwarded: hops > 0 });
      if (place.where === "here") {
        const fence = this.shards.fenceOf(shard);
        if (fence !== undefined) return { where: "here", shard, fence };
        continue;
      }
      if (place.where === "changing") {
        if (this.shards.isDraining(shard)) {
          await this.shards.whenChanged(shard, remaining);
          continue;
        }
        try {
          const fence = await this.shards.acquire(shard);
          return { where: "here", shard, fence };
        } catch (error) {
          if (!(error instanceof SessionOwnedElsewhereError)) {
            // NATS away or a lost race: look again shortly.
            await this.shards.whenChanged(shard, Math.min(remaining, 250));
          }
          continue;
        }
      }
      // Forwarded here already and the map names another host: the map may lag; wait for it once.
      if (hops > 0 && !hasWaitedForMap) {
        hasWaitedForMap = true;
        await this.shards.whenChanged(shard, Math.min(remaining, MAP_LAG_MS));
        continue;
      }
      const probe = `${place.subject}.${probeSubject ?? `agents.${agent}.chat`}`;
      if (await this.#isReachable(probe)) {
        return { where: "forward", shard, host: place.host, subject: place.subject };
      }
      // The owner is gone (killed) or cut off: its lease stands until it expires — a host cut off
      // from NATS may still be running the session — so wait for that, or for news of the shard.
      const lease = this.shards.leaseOf(shard);
      const untilFree = lease === undefined ? 250 : lease.expiresAt + skewMs - Date.now() + 1;
      await this.shards.whenChanged(shard, Math.min(remaining, Math.max(50, untilFree)));
    }
  }

  /**
   * The fence a session built here runs under: its shard's, taken now if it is free and this host
   * may have it.
   * @throws SessionOwnedElsewhereError when another host holds or should hold the shard.
   */
  async fenceFor(agent: string, session: string): Promise<LeaseFence> {
    const shard = this.shards.shardOf(agent, session);
    // Held here, even while it is being handed over: a request placed before the hand-over began
    // holds the shard (the drain waits for it), so its session is built under the shard's fence.
    const held = this.shards.fenceOf(shard);
    if (held !== undefined) return held;
    const place = this.shards.place(shard);
    if (place.where === "elsewhere")
      throw new SessionOwnedElsewhereError(agent, session, this.#recordOf(place));
    return this.shards.acquire(shard);
  }

  /**
   * The host that owns (or should own) the session, when it is another one; undefined when this
   * host holds its shard or may take it (the journal sweeper asks before resuming a session here).
   */
  async ownerElsewhere(agent: string, session: string): Promise<LeaseRecord | undefined> {
    const place = this.shards.place(this.shards.shardOf(agent, session));
    return place.where === "elsewhere" ? this.#recordOf(place) : undefined;
  }

  /**
   * Re-publishes the request to `subject` (a host's `<prefix>.hosts.<host>`) with the requester's
   * reply subject. Past {@link MAX_FORWARD_HOPS} (ownership moving under it) the request is refused
   * instead, as retryable.
   * @returns the error reply to send here, or undefined when the owner will answer.
   */
  forward(
    subject: string,
    agent: string,
    verb: RequestVerb,
    message: BusMessage,
  ): ReturnType<typeof errorReply> | undefined {
    const hops = forwardHopsOf(message);
    if (hops >= MAX_FORWARD_HOPS) {
      return errorReply(
        "unavailable",
        `the session's owner kept changing (forwarded ${hops} times); retry the request`,
      );
    }
    // The caller's own headers (lineage, trace context, a parent's lease, a request id) travel on:
    // the owner must see the request as the caller sent it.
    passOnRequest(this.#connection, `${subject}.agents.${agent}.${verb}`, message, {
      ...message.headers,
      [FORWARD_HOPS_HEADER]: String(hops + 1),
    });
    return undefined;
  }

  /**
   * Leaves the members (others stop preferring this host), then hands every shard over: drained
   * (see {@link onDrain}) and released, while requests for them wait and then go to the next owner.
   */
  async leave(): Promise<void> {
    this.shards.leave();
    await this.membership.leave();
    await this.shards.handOverAll();
  }

  /** Gives up every shard (after the sessions have stopped) and the membership. */
  async close(): Promise<void> {
    // Side by side: with NATS away each waits its bounded time, not one after the other.
    await Promise.all([this.shards.close(), this.membership.close()]);
  }

  /**
   * Whether the host still answers on `probe` (one of its subjects): an empty request, answered
   * `bad_request` at once by a live host. A host that died (kill -9) has no subscription left: "no
   * responders". One killed a moment ago may still have it (the server has not yet seen its socket
   * close): the probe is delivered and never answered, so silence counts as unreachable too —
   * forwarding to it would lose the request.
   */
  #isReachable(probe: string): Promise<boolean> {
    return this.#probes.isReachable(probe);
  }

  #recordOf(place: { shard: number; host: string; subject: string }): LeaseRecord {
    return (
      this.shards.leaseOf(place.shard) ?? {
        host: place.host,
        subject: place.subject,
        epoch: 0,
        acquiredAt: 0,
        renewedAt: 0,
        expiresAt: 0,
        ttlMs: this.timing.ttlMs,
      }
    );
  }
}

/** How many times the request was forwarded between hosts already. */
export function forwardHopsOf(message: BusMessage): number {
  return Number(message.headers?.[FORWARD_HOPS_HEADER] ?? "0") || 0;
}
