import { JetStreamApiError } from "@nats-io/jetstream";
import { jserrors } from "@nats-io/jetstream/internal";
import type { NatsConnection } from "@nats-io/transport-node";
import type { BusMessage } from "../bus/bus.js";
import { errorReply } from "../bus/contract.js";
import { NatsPermissionError, permissionDenialOf } from "../bus/nats-permission-error.js";
import { NAME_PATTERN, type RequestVerb } from "../bus/subjects.js";
import { describeError } from "../errors/describe-error.js";
import { sleep } from "../timers/sleep.js";
import { LeaseKeeper } from "./lease-keeper.js";
import { answersProbe, passOnRequest } from "./pass-on.js";
import { RequestDedupe } from "./request-dedupe.js";
import { type LeaseRecord, type LeaseTiming, SessionLeaseStore } from "./session-lease.js";

/** How many times one request may be forwarded between hosts before it is refused. */
export const MAX_FORWARD_HOPS = 3;

/** How long a probe of the owner may take before it counts as alive (slow, not gone). */
const PROBE_TIMEOUT_MS = 2_000;

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
  connection: NatsConnection;
  prefix: string;
  /** This host's id; must be one subject token (see {@link toHostToken}). */
  hostId: string;
  timing: LeaseTiming;
  /** `--dedupe-window`. */
  dedupeWindowMs?: number;
  /** `--js-replicas`: replicas of the lease and reply buckets when they are created. */
  replicas?: number;
  stateOf?: (agent: string, session: string) => string | undefined;
  log?: (line: string) => void;
}

/** A request forwarded to its session's owner: the owner answers the requester directly. */
export const FORWARDED = { ok: true } as const;

/**
 * What makes several hosts on one NATS system act as one, bundled for the agent host:
 * the {@link LeaseKeeper} (single activation, fencing), the {@link RequestDedupe} (a request id is
 * answered once), and forwarding. Hosts share the queue group on `<prefix>.agents.<agent>.<verb>`;
 * a request for a session another host owns is re-published on the owner's
 * `<prefix>.hosts.<owner>.agents.<agent>.<verb>` with the requester's reply subject, so the owner
 * answers the requester itself and nothing waits in between.
 */
export class SessionCluster {
  readonly hostId: string;
  readonly leases: LeaseKeeper;
  readonly dedupe: RequestDedupe;
  readonly #connection: NatsConnection;
  readonly #prefix: string;
  #onLost: (agent: string, session: string, reason: string) => void = () => {};

  private constructor(options: SessionClusterOptions, store: SessionLeaseStore, dedupe: RequestDedupe) {
    this.hostId = options.hostId;
    this.#connection = options.connection;
    this.#prefix = options.prefix;
    this.dedupe = dedupe;
    this.leases = new LeaseKeeper({
      store,
      hostId: options.hostId,
      subject: hostSubject(options.prefix, options.hostId),
      ...(options.stateOf === undefined ? {} : { stateOf: options.stateOf }),
      onLost: (agent, session, reason) => this.#onLost(agent, session, reason),
      ...(options.log === undefined ? {} : { log: options.log }),
    });
  }

  /**
   * Opens (creating if needed) the lease and reply buckets.
   * @throws when JetStream is not available on the server.
   */
  static async start(options: SessionClusterOptions): Promise<SessionCluster> {
    if (!NAME_PATTERN.test(options.hostId)) {
      throw new RangeError(`the host id must be one subject token of [A-Za-z0-9_-], got "${options.hostId}"`);
    }
    const store = await SessionLeaseStore.open(options.connection, {
      prefix: options.prefix,
      timing: options.timing,
      ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
    });
    const dedupe = await RequestDedupe.open(options.connection, {
      prefix: options.prefix,
      hostId: options.hostId,
      ...(options.dedupeWindowMs === undefined ? {} : { windowMs: options.dedupeWindowMs }),
      ...(options.replicas === undefined ? {} : { replicas: options.replicas }),
      ...(options.log === undefined ? {} : { log: options.log }),
    });
    return new SessionCluster(options, store, dedupe);
  }

  /**
   * {@link start}, telling an answer from silence. When JetStream is not enabled, or answers the
   * bucket requests with an error (a full account, say), resolves `{ unavailable: reason }`: the
   * host runs alone, as before. A timeout or a lost connection is retried until `retryForMs`
   * (default 30 s) has passed, then thrown (a refused permission is thrown at once, as a
   * NatsPermissionError naming the subject): giving up on the first one would start a host of a
   * cluster without leases, next to hosts that have them.
   */
  static async startOrExplain(
    options: SessionClusterOptions,
    retry: { retryForMs?: number; delayMs?: number } = {},
  ): Promise<SessionCluster | { unavailable: string }> {
    const deadline = Date.now() + (retry.retryForMs ?? 30_000);
    for (let attempt = 1; ; attempt++) {
      try {
        return await SessionCluster.start(options);
      } catch (error) {
        // The server refused a subject: its answer, not a timeout, and it will not change by waiting.
        const denial = permissionDenialOf(error);
        if (denial !== undefined) throw new NatsPermissionError([denial], options.prefix);
        const reason = describeError(error);
        // The server answered (JetStream is off, or refused the request): trying again will not help.
        const answered = error instanceof JetStreamApiError || error instanceof jserrors.JetStreamNotEnabled;
        if (answered) return { unavailable: reason };
        if (error instanceof RangeError || Date.now() >= deadline) throw error;
        options.log?.(`session leases: attempt ${attempt} failed (${reason}); trying again`);
        await sleep(Math.min(5_000, (retry.delayMs ?? 500) * attempt));
      }
    }
  }

  /** Who stops a session whose lease is lost (the host's session manager). */
  onLost(handler: (agent: string, session: string, reason: string) => void): void {
    this.#onLost = handler;
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
   * The live lease of another host, if any (see {@link LeaseKeeper.ownerElsewhere}). A read that
   * fails (NATS restarting, JetStream not back yet) is tried again for up to a lease's TTL: the
   * request is in hand here, and the session's heartbeat keeps its caller waiting meanwhile.
   */
  async ownerElsewhere(agent: string, session: string): Promise<LeaseRecord | undefined> {
    const deadline = Date.now() + this.leases.store.timing.ttlMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.leases.ownerElsewhere(agent, session);
      } catch (error) {
        if (Date.now() >= deadline) throw error;
        await sleep(Math.min(1_000, 100 * attempt));
      }
    }
  }

  /**
   * Re-publishes the request to the owner with the requester's reply subject. Past
   * {@link MAX_FORWARD_HOPS} (ownership moving under it) the request is refused instead.
   * @returns the error reply to send here, or undefined when the owner will answer.
   */
  forward(
    owner: LeaseRecord,
    agent: string,
    verb: RequestVerb,
    message: BusMessage,
  ): ReturnType<typeof errorReply> | undefined {
    const hops = Number(message.headers?.[FORWARD_HOPS_HEADER] ?? "0") || 0;
    if (hops >= MAX_FORWARD_HOPS) {
      return errorReply(
        "internal",
        `the session's owner kept changing (forwarded ${hops} times); retry the request`,
      );
    }
    const subject = `${owner.subject ?? hostSubject(this.#prefix, owner.host)}.agents.${agent}.${verb}`;
    passOnRequest(this.#connection, subject, message, { [FORWARD_HOPS_HEADER]: String(hops + 1) });
    return undefined;
  }

  /**
   * Whether the owner still answers on its subject: an empty request, answered `bad_request` at
   * once by a live host. A host that died (kill -9) has no subscription left: "no responders". One
   * killed a moment ago may still have it (the server has not yet seen its socket close): the probe
   * is delivered and never answered, so silence counts as unreachable too — forwarding to it would
   * lose the request. Either way its lease still stands until it expires — a host cut off from NATS
   * may still be running the session — so the caller waits for {@link untilExpired} rather than
   * taking it now; a live owner that was only slow has renewed by then and is probed again.
   */
  async isReachable(owner: LeaseRecord, agent: string, verb: RequestVerb): Promise<boolean> {
    const subject = `${owner.subject ?? hostSubject(this.#prefix, owner.host)}.agents.${agent}.${verb}`;
    return answersProbe(this.#connection, subject, PROBE_TIMEOUT_MS);
  }

  /** Resolves once another host may take the owner's lease (its expiry plus the skew margin). */
  untilExpired(owner: LeaseRecord): Promise<void> {
    const waitMs = owner.expiresAt + this.leases.store.timing.skewMs - Date.now() + 1;
    return sleep(waitMs);
  }

  /** Gives up every lease (after the sessions have stopped). */
  close(): Promise<void> {
    return this.leases.close();
  }
}
