import type { ToolApprovalDecision } from "../agent/tool-approvals.js";
import type { Bus, BusMessage, Subscription } from "../bus/bus.js";
import {
  type ChatReply,
  type ChatRequest,
  type ControlReply,
  type ControlRequest,
  errorReply,
  parseChatRequest,
  parseControlReply,
  parseControlRequest,
} from "../bus/contract.js";
import { isOverMaxPayload } from "../bus/payload-size.js";
import { controlSubject, DEFAULT_PREFIX, parseRequestSubject } from "../bus/subjects.js";
import type { AgentRouting } from "../cluster/agent-routing.js";
import { LeaseLostError } from "../cluster/lease-fence.js";
import { forwardHopsOf, hostSubject, type SessionCluster } from "../cluster/session-cluster.js";
import { SessionOwnedElsewhereError } from "../cluster/session-lease.js";
import { type ChatLineage, describeChain, isOnChain, readLineageHeaders } from "../contract/chat-lineage.js";
import { type ParentLease, readParentLease } from "../contract/parent-lease.js";
import type { ResumeCounts } from "../journal/resume-counts.js";
import { type DeadlineTimer, deadlineTimer } from "../timers/deadline-signal.js";
import { describeFailure, type SessionError } from "./describe-failure.js";
import { LoopPressure } from "./loop-pressure.js";
import { watchParentLease } from "./parent-lease-watch.js";
import type { QuietCollector } from "./quiet-collector.js";
import { createRefusalLog, type RefusalLog } from "./refusal-log.js";
import { readRequestApprovals } from "./request-approvals.js";
import { readRequestDepth } from "./request-depth.js";
import type { ChatOutcome, SessionActor } from "./session-actor.js";
import { chatReplyOf, createSessionFactory, type SessionAgentFactory } from "./session-factory.js";
import { SessionHeartbeats } from "./session-heartbeats.js";
import {
  HostMemoryOverloadedError,
  type ManagerTimers,
  SessionManager,
  SessionManagerClosedError,
  SessionManagerOverloadedError,
} from "./session-manager.js";

/** How long a decision handed down an agent tree waits for the holding session's answer. */
const DECIDE_BELOW_TIMEOUT_MS = 10_000;

/** How long `close()` lets running chats finish by default before cancelling them. */
export const DEFAULT_GRACE_MS = 30_000;

/**
 * How the host receives requests on `subject` (`<prefix>.agents.*.<verb>`) in `queue`. Default:
 * a plain bus subscription. On NATS, `$SRV` endpoints (src/host/contract-service.ts), which use
 * `handle`'s promise — the reply sent, once sent — for their statistics.
 */
export type RequestListener = (
  /** The endpoint's name (`chat`, `control`; `$SRV` shows it). */
  verb: string,
  subject: string,
  queue: string,
  handle: (message: BusMessage) => Promise<ChatReply | ControlReply>,
) => Subscription;

export interface AgentHostOptions {
  bus: Bus;
  /** Subject prefix; default `agentloop`. */
  prefix?: string;
  /** The agents this host answers for; any other name gets `unknown_agent`. */
  agents: readonly string[];
  createAgent: SessionAgentFactory;
  /** Queue group shared by every host serving these subjects; default `<prefix>_host`. */
  queueGroup?: string;
  /** Mailbox limit per session; default 200. */
  maxQueue?: number;
  /** Idle sessions are passivated after this long; default 12 h. */
  idleTimeoutMs?: number;
  /** Live sessions at most (default 10,000); past it a new session gets `overloaded`. */
  maxSessions?: number;
  /**
   * Bytes the live sessions' messages may hold in memory, all together (default 512 MiB, or half
   * the heap limit if smaller): over it idle sessions are passivated, least recently used first, and
   * with none idle a chat gets `overloaded`.
   */
  maxMemoryBytes?: number;
  /**
   * Bytes one session's messages may hold in memory: a session over it is compacted before its next
   * chat, which gets `bad_request` if the session is still over. Default: no limit.
   */
  maxSessionBytes?: number;
  sweepIntervalMs?: number;
  /**
   * Sheds load: while the host's event loop runs more than this many ms behind (smoothed, see
   * {@link LoopPressure}), a new chat that would run here is refused at once with a retryable
   * `overloaded`, so the chats already taken finish instead of every one stalling. Chats asked by
   * another agent (depth > 0), control verbs and requests passed on to other hosts are never
   * refused for it. Default: off (`serve` and `up` turn it on, `--max-loop-delay`).
   */
  maxLoopDelayMs?: number;
  /** The gauge itself (tests feed it samples); default one built from `maxLoopDelayMs`. */
  loopPressure?: LoopPressure;
  /**
   * Sheds load: chats in progress on this host at most (running or waiting in their sessions,
   * nested ones included). At the limit, a new chat that would run here is refused at once with a
   * retryable `overloaded` instead of joining a crowd where every chat slows down for all the
   * others (the host's CPU is shared by all it took). Chats asked by another agent (depth > 0) are
   * counted but never refused. Default: no limit (`serve` and `up` set 1,000, `--max-chats`).
   */
  maxChats?: number;
  /** Counts the sessions resumed from their journals (first touch vs. the journal sweeper). */
  resumeCounts?: ResumeCounts;
  /** How long `close()` waits for running chats by default (30 s). */
  graceMs?: number;
  now?: () => number;
  timers?: ManagerTimers;
  /** One-line notices (failed session creations, passivation problems). Default: none. */
  log?: (line: string) => void;
  /** Named in the session heartbeats; default host name, pid and a random suffix. */
  hostId?: string;
  /** How often a session with a request in hand beats; default 2 s (HEARTBEAT_INTERVAL_MS). */
  heartbeatIntervalMs?: number;
  /** How requests arrive; default plain subscriptions on the bus. */
  listen?: RequestListener;
  /**
   * Several hosts on one NATS system: session leases (one owner per session, fenced), forwarding
   * to the owner, request-id dedupe. See src/cluster/. Without it this host owns every session it
   * is asked about.
   */
  cluster?: SessionCluster;
  /**
   * The longest a chat may run (`--max-chat-time`), then it is cancelled; the chats it asks
   * (`ask_agent`) get what is left of it as their deadline. Default: no limit (a child is still
   * bound by its parent's deadline).
   */
  maxChatTimeMs?: number;
  /**
   * On NATS: passes a request for an agent this host does not serve to a host that does (hosts
   * with different agents may share a prefix). Without it such a request gets `unknown_agent`.
   */
  routing?: AgentRouting;
  /**
   * Told when each request starts and ends, to give a burst's memory back once the process has been
   * quiet for a while. One per process, shared by its hosts (tenants' too): a host is quiet only
   * when all are. Its owner closes it. Default: none.
   */
  quietCollector?: QuietCollector;
}

/** What a host answers on `<prefix>.hosts.<host>.sessions`: its live sessions and their shards' leases. */
export interface HostSessionListing {
  host: string;
  /** How many shards the host holds now. */
  shards?: number;
  sessions: {
    agent: string;
    session: string;
    shard: number;
    state: "idle" | "busy";
    /** The epoch of the shard's lease. */
    epoch: number;
    /** When the shard's lease was taken and when it expires (ms since the epoch, the owner's clock). */
    acquiredAt: number;
    expiresAt: number;
  }[];
}

/** How many of the sessions a lost shard stopped are named in the log line (the rest are counted). */
const STOPPED_NAMED = 10;

/** A request the host serves, checked: its agent, its session and what it asks. */
type CheckedRequest = { agent: string; session: string } & (
  | {
      verb: "chat";
      chat: ChatRequest;
      depth: number;
      approvals: string[];
      lineage: ChatLineage | undefined;
      traceparent: string | undefined;
      /** Where the asking chat renews its lease on this one (see src/tools/parent-lease.ts). */
      lease: ParentLease | undefined;
    }
  | { verb: "control"; control: ControlRequest }
);

/** What {@link AgentHost.#check} made of a request. */
type Checked =
  | CheckedRequest
  | { verb: "refused"; reply: Extract<ChatReply, { ok: false }> }
  | { verb: "unserved"; agent: string; requested: "chat" | "control" };

/** Where a request's session is: here (live, or not for a `stop`), failed to start, or the request was sent on. */
type Placed =
  | { where: "here"; actor: SessionActor | undefined; done: () => void }
  | { where: "failed"; error: unknown }
  | { where: "sent"; reply: ChatReply | ControlReply };

/**
 * The agent host: answers `<prefix>.agents.<agent>.chat` and `.control` in a queue group,
 * validating every payload (a malformed one gets `bad_request` and the host goes on serving), and
 * hands each message to its session's actor. Sessions publish their events through the agent
 * factory's event listener on `<prefix>.events.<agent>.<session>.<Kind>`.
 *
 * Every request, whichever door it came in by, goes one straight way through
 * {@link AgentHost.#handle}: checked, placed (routed to its session's owner, the session taken
 * here), deduped by its `id`, handed to the session, answered. Each step returns to `#handle`.
 */
export class AgentHost {
  readonly prefix: string;
  readonly agents: readonly string[];
  readonly sessions: SessionManager;
  readonly #bus: Bus;
  readonly #agentNames: ReadonlySet<string>;
  readonly #queueGroup: string;
  readonly #graceMs: number;
  readonly #log: (line: string) => void;
  readonly #inFlight = new Set<Promise<void>>();
  readonly #heartbeats: SessionHeartbeats;
  readonly #listen: RequestListener;
  readonly #cluster: SessionCluster | undefined;
  readonly #routing: AgentRouting | undefined;
  /** Requests placed on each shard held here and not yet answered. */
  readonly #placed = new Map<number, number>();
  #forwarded: Subscription | undefined;
  /** How long a drained shard's requests may take: the grace of `close()` once it was called. */
  #drainGraceMs: number;
  /** Cuts the drain's grace short once `close()` was told to hurry (a second signal). */
  #drainHurry: AbortSignal | undefined;
  readonly #maxChatTimeMs: number | undefined;
  /** The chat requests here that a `cancel` can reach, by agent, session and request id. */
  readonly #cancellable = new Map<string, AbortController>();
  /**
   * Request ids cancelled lately (with when the mark lapses): a chat request that arrives after its
   * `cancel` (it was still on its way, or is asked again) is answered `cancelled` without running.
   */
  readonly #cancelled = new Map<string, number>();
  readonly #now: () => number;
  readonly #pressure: LoopPressure | undefined;
  readonly #maxChats: number | undefined;
  /** Chats placed on this host and not answered yet. */
  #chatsHere = 0;
  readonly #refused: RefusalLog;
  /** Sessions stopped by lost shards this turn, by reason, to be logged together (see #noteStopped). */
  readonly #stoppedNotes = new Map<string, [string, string][]>();
  readonly #stoppedCounts = new Map<string, number>();
  readonly #quiet: QuietCollector | undefined;
  #subscriptions: Subscription[] = [];
  #closing: Promise<void> | undefined;

  constructor(options: AgentHostOptions) {
    this.#bus = options.bus;
    this.prefix = options.prefix ?? DEFAULT_PREFIX;
    this.agents = [...options.agents];
    this.#agentNames = new Set(options.agents);
    this.#queueGroup = options.queueGroup ?? `${this.prefix.replace(/\./g, "_")}_host`;
    this.#graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
    this.#drainGraceMs = this.#graceMs;
    this.#log = options.log ?? (() => {});
    this.#listen =
      options.listen ??
      ((_verb, subject, queue, handle) =>
        this.#bus.subscribe(subject, (message) => void handle(message), { queue }));
    this.#heartbeats = new SessionHeartbeats({
      bus: options.bus,
      prefix: this.prefix,
      ...(options.hostId === undefined ? {} : { hostId: options.hostId }),
      ...(options.heartbeatIntervalMs === undefined ? {} : { intervalMs: options.heartbeatIntervalMs }),
      ...(options.now === undefined ? {} : { now: options.now }),
    });
    this.#cluster = options.cluster;
    this.#routing = options.routing;
    this.#maxChatTimeMs = options.maxChatTimeMs;
    this.#now = options.now ?? Date.now;
    this.#pressure =
      options.loopPressure ??
      (options.maxLoopDelayMs !== undefined && options.maxLoopDelayMs > 0
        ? new LoopPressure({ maxDelayMs: options.maxLoopDelayMs })
        : undefined);
    this.#refused = createRefusalLog(this.#log, { now: this.#now });
    this.#maxChats =
      options.maxChats !== undefined && options.maxChats > 0 ? Math.floor(options.maxChats) : undefined;
    this.#quiet = options.quietCollector;
    this.sessions = new SessionManager({
      createSession: createSessionFactory({
        createAgent: options.createAgent,
        ...(options.cluster === undefined ? {} : { cluster: options.cluster }),
        ...(options.maxQueue === undefined ? {} : { maxQueue: options.maxQueue }),
        ...(options.maxSessionBytes === undefined ? {} : { maxSessionBytes: options.maxSessionBytes }),
        ...(options.now === undefined ? {} : { now: options.now }),
        ...(options.resumeCounts === undefined ? {} : { resumeCounts: options.resumeCounts }),
        log: this.#log,
      }),
      ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }),
      ...(options.maxSessions === undefined ? {} : { maxSessions: options.maxSessions }),
      ...(options.maxMemoryBytes === undefined ? {} : { maxMemoryBytes: options.maxMemoryBytes }),
      ...(options.sweepIntervalMs === undefined ? {} : { sweepIntervalMs: options.sweepIntervalMs }),
      ...(options.now === undefined ? {} : { now: options.now }),
      ...(options.timers === undefined ? {} : { timers: options.timers }),
      // Sessions indexed by shard: a shard lost or drained finds its own without a pass over all.
      ...(options.cluster === undefined
        ? {}
        : { groupOf: (agent: string, session: string) => options.cluster!.shardOf(agent, session) }),
      log: this.#log,
    });
    // A shard lost (not renewed in time, or taken over) stops its sessions here at once.
    this.#cluster?.onShardLost((shard, reason) => {
      const stopped = this.#sessionsOf(shard);
      for (const [agent, session] of stopped) {
        // Not the chats' end: the next owner resumes them from the journal, and a retry reaches it.
        void this.sessions.drop(
          agent,
          session,
          `this host lost the session (${reason}); retry the request`,
          "unavailable",
        );
      }
      this.#noteStopped(stopped, reason);
    });
    this.#cluster?.onDrain((shard) => this.#drain(shard));
  }

  /** This host's live sessions, each with its shard's lease: the answer to `.sessions`. */
  #listSessions(cluster: SessionCluster): HostSessionListing {
    const sessions: HostSessionListing["sessions"] = [];
    for (const [agent, session] of this.sessions.liveSessions()) {
      const shard = cluster.shardOf(agent, session);
      const lease = cluster.shards.leaseOf(shard);
      sessions.push({
        agent,
        session,
        shard,
        state: this.sessions.find(agent, session)?.isIdle === false ? "busy" : "idle",
        epoch: cluster.shards.fenceOf(shard)?.epoch ?? lease?.epoch ?? 0,
        acquiredAt: lease?.acquiredAt ?? 0,
        expiresAt: lease?.expiresAt ?? 0,
      });
    }
    return { host: cluster.hostId, shards: cluster.shards.heldCount, sessions };
  }

  /** The live sessions of `shard` here. */
  #sessionsOf(shard: number): [string, string][] {
    return this.#cluster === undefined ? [] : this.sessions.liveSessionsIn(shard);
  }

  /**
   * Logs the sessions a lost shard stopped: one line per reason for all the shards lost in the same
   * turn (a lapsed host lease loses every shard at once), naming the first few sessions. A line per
   * session would be thousands of synchronous writes to stderr in one turn of the event loop.
   */
  #noteStopped(stopped: readonly [string, string][], reason: string): void {
    if (stopped.length === 0) return;
    const pending = this.#stoppedNotes.get(reason);
    if (pending !== undefined) {
      pending.push(...stopped.slice(0, STOPPED_NAMED - pending.length));
      this.#stoppedCounts.set(reason, (this.#stoppedCounts.get(reason) ?? 0) + stopped.length);
      return;
    }
    this.#stoppedNotes.set(reason, stopped.slice(0, STOPPED_NAMED));
    this.#stoppedCounts.set(reason, stopped.length);
    queueMicrotask(() => {
      const named = this.#stoppedNotes.get(reason) ?? [];
      const count = this.#stoppedCounts.get(reason) ?? named.length;
      this.#stoppedNotes.delete(reason);
      this.#stoppedCounts.delete(reason);
      const names = named.map(([agent, session]) => `${agent}/${session}`).join(", ");
      this.#log(
        count === 1
          ? `session ${names} stopped here: ${reason}`
          : `${count} sessions stopped here (${names}${count > named.length ? `, and ${count - named.length} more` : ""}): ${reason}`,
      );
    });
  }

  /**
   * Before the shard is handed to another host (requests for it already wait, see
   * {@link SessionCluster.locate}): lets the requests placed here finish and the shard's sessions go
   * idle, for up to the grace time, then stops them. A chat still running then is cut off like at a
   * lost lease: its journal lets the next owner finish it, and a retry of its id joins that.
   */
  async #drain(shard: number): Promise<void> {
    const deadline = Date.now() + this.#drainGraceMs;
    const hurry = this.#drainHurry;
    // A chat awaiting a tool approval would hold the grace for nothing: it is parked (its approval
    // stays in the history and the journal) and the shard's next owner takes it up.
    for (const [agent, session] of this.#sessionsOf(shard)) {
      void this.sessions.find(agent, session)?.parkPendingApproval();
    }
    const isSettled = () =>
      (this.#placed.get(shard) ?? 0) === 0 &&
      this.#sessionsOf(shard).every(
        ([agent, session]) => this.sessions.find(agent, session)?.isIdle !== false,
      );
    while (!isSettled() && Date.now() < deadline && hurry?.aborted !== true) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // Shutting down, what still runs is cancelled as at any shutdown; else the shard just moved, and
    // what still runs is the next owner's to finish (answered retryable, its journal left to it).
    const isMoving = this.#closing === undefined;
    const reason = isMoving ? "its shard is handed to another host" : "the host is shutting down";
    await Promise.allSettled(
      this.#sessionsOf(shard).map(([agent, session]) =>
        this.sessions.drop(agent, session, reason, isMoving ? "unavailable" : "cancelled"),
      ),
    );
  }

  /**
   * Counts a request placed on this host's `shard` until the returned function is called: a shard
   * is not handed over while requests placed on it are still being answered here.
   */
  holdShard(shard: number): () => void {
    this.#placed.set(shard, (this.#placed.get(shard) ?? 0) + 1);
    let isDone = false;
    return () => {
      if (isDone) return;
      isDone = true;
      const left = (this.#placed.get(shard) ?? 1) - 1;
      if (left <= 0) this.#placed.delete(shard);
      else this.#placed.set(shard, left);
    };
  }

  /**
   * Where a request for the session is answered: `here` (its shard is held; call `done` when the
   * answer is out), `forward` (to the host at `subject`, which answers the requester), or
   * `unavailable` (retryable). Without a cluster, always here. Agent Protocol prompts ask this too.
   */
  async locate(
    agent: string,
    session: string,
    hops = 0,
  ): Promise<
    | { where: "here"; done: () => void }
    | { where: "forward"; subject: string }
    | { where: "unavailable"; reason: string }
  > {
    const cluster = this.#cluster;
    if (cluster === undefined) return { where: "here", done: () => {} };
    const location = await cluster.locate(agent, session, hops);
    if (location.where !== "here") return location;
    return { where: "here", done: this.holdShard(location.shard) };
  }

  /** `<prefix>.hosts.<host>`: where other hosts forward requests for shards held here (with a cluster). */
  get forwardSubject(): string | undefined {
    return this.#cluster === undefined ? undefined : hostSubject(this.prefix, this.#cluster.hostId);
  }

  /** Requests being handled right now. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Subscribes and starts passivating idle sessions. */
  start(): this {
    if (this.#subscriptions.length > 0 || this.#closing !== undefined) return this;
    const handle = this.#handle;
    this.#subscriptions = [
      this.#listen("chat", `${this.prefix}.agents.*.chat`, this.#queueGroup, handle),
      this.#listen("control", `${this.prefix}.agents.*.control`, this.#queueGroup, handle),
    ];
    const cluster = this.#cluster;
    if (cluster !== undefined) {
      // Requests other hosts forward to this one, for the sessions it owns (no queue group).
      this.#forwarded = this.#bus.subscribe(
        cluster.forwardedPattern,
        (message) => void handle(cluster.asAgentRequest(message)),
      );
      this.#subscriptions.push(this.#forwarded);
      // `<prefix>.hosts.<host>.sessions`: what `agentloop sessions` asks every live member.
      this.#subscriptions.push(
        this.#bus.subscribe(`${hostSubject(this.prefix, cluster.hostId)}.sessions`, (message) => {
          this.#bus.respond(message, JSON.stringify(this.#listSessions(cluster)));
        }),
      );
    }
    const routing = this.#routing;
    if (routing !== undefined) {
      // Requests other hosts pass on for the agents this one serves (see AgentRouting).
      for (const agent of this.agents) {
        this.#subscriptions.push(
          this.#bus.subscribe(
            routing.patternFor(agent),
            (message) => void handle(routing.asAgentRequest(message)),
            { queue: this.#queueGroup },
          ),
        );
      }
    }
    this.sessions.start();
    this.#pressure?.start();
    return this;
  }

  /**
   * Graceful shutdown: stops accepting requests, lets running chats finish for up to `graceMs`
   * (or until `hurry` aborts: a second SIGTERM), then cancels what is left (those callers are
   * answered `cancelled`, their chats back-fill the history), waits until every session has let go
   * of its agent and every reply is sent. The bus stays open (its owner closes it).
   */
  close(options: { graceMs?: number; hurry?: AbortSignal } = {}): Promise<void> {
    this.#closing ??= (async () => {
      // Requests forwarded here keep coming until this host's shards are handed over.
      const forwarded = this.#forwarded;
      // Drained, not just unsubscribed: a request the server already routed here is still answered.
      await Promise.all(
        this.#subscriptions
          .filter((subscription) => subscription !== forwarded)
          .map(async (subscription) => {
            if (subscription.drain === undefined) subscription.unsubscribe();
            else await subscription.drain();
          }),
      );
      this.#subscriptions = [];
      this.#drainGraceMs = options.graceMs ?? this.#graceMs;
      this.#drainHurry = options.hurry;
      // The other hosts stop preferring this one; its shards are drained and handed over.
      await this.#cluster?.leave();
      await this.sessions.close({
        graceMs: options.graceMs ?? this.#graceMs,
        ...(options.hurry === undefined ? {} : { hurry: options.hurry }),
      });
      await Promise.allSettled([...this.#inFlight]);
      if (forwarded !== undefined && this.#cluster !== undefined) {
        // A host that read the shard map a moment before this one's releases may still forward a
        // request here: for a short while such requests are passed on to the shards' new owners.
        await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, this.#cluster!.timing.ttlMs / 3)));
        await (forwarded.drain?.() ?? forwarded.unsubscribe());
        await Promise.allSettled([...this.#inFlight]);
      }
      await this.#cluster?.close();
      this.#pressure?.close();
      this.#heartbeats.close();
      await this.#bus.flush().catch(() => {});
    })();
    return this.#closing;
  }

  /**
   * Answers one request, whichever door it came in by; resolves with the reply sent. The whole way
   * in, in order — each step returns here: check it ({@link #check}), pass on one for an agent
   * served elsewhere, beat the session's heartbeat, place it ({@link #place}: forwarded to the
   * session's owner, or the session taken here), then for a chat: its `id`'s dedupe, the session's
   * chat, the dedupe's record; for a control verb, the session's command. Then the reply.
   */
  readonly #handle = async (message: BusMessage): Promise<ChatReply | ControlReply> => {
    const finished = this.#track();
    try {
      const request = this.#check(message);
      if (request.verb === "refused") return this.#reply(message, request.reply);
      if (request.verb === "unserved") {
        if (await this.#routing?.passOn(request.agent, request.requested, message)) return { ok: true };
        return this.#reply(
          message,
          errorReply(
            "unknown_agent",
            `no agent named "${request.agent}" (this host serves: ${this.agents.join(", ")})`,
          ),
        );
      }
      const { agent, session } = request;
      // The session beats until the reply is out, so the caller can tell "working" from "gone".
      const release = this.#heartbeats.track(agent, session);
      let releaseShard = () => {};
      let cancelling: string | undefined;
      let leased: { signal: AbortSignal; close(): void } | undefined;
      let timeout: DeadlineTimer | undefined;
      try {
        const placed = await this.#place(message, request);
        if (placed.where === "sent") return placed.reply;
        // Answered before the shard may be handed over.
        if (placed.where === "here") releaseShard = placed.done;
        if (request.verb === "control") {
          const reply =
            placed.where === "failed"
              ? { ok: false as const, error: sessionStartError(placed.error) }
              : await this.#control(request, placed.actor);
          return this.#reply(message, reply);
        }
        const { chat } = request;
        const echo = chat.id === undefined ? {} : { id: chat.id };
        // One run per id: a retry joins the run in progress or gets the stored reply.
        const dedupe = chat.id === undefined ? undefined : this.#cluster?.dedupe;
        const step =
          dedupe === undefined || chat.id === undefined
            ? undefined
            : await dedupe.begin(agent, session, chat.id, { claimLater: true });
        let reply: ChatReply;
        let outcome: ChatOutcome | undefined;
        if (step !== undefined && "reply" in step) {
          reply = step.reply;
        } else {
          let failure = placed.where === "failed" ? placed.error : undefined;
          // Stopped here awaiting a tool approval: the chat goes on on the session's next host.
          let isParked = false;
          if (placed.where === "here" && placed.actor !== undefined) {
            let actor = placed.actor;
            try {
              // Stopped (passivated) while the dedupe was read: a fresh one, checked in the same tick as the chat is queued.
              while (actor.isStopped) actor = await this.sessions.open(agent, session, { isChat: true });
              // The asking agent's approvals hold here too, before this chat is even queued.
              if (request.approvals.length > 0) actor.agent.inheritApprovals?.(request.approvals);
              const deadline = this.#deadlineOf(request.lineage);
              timeout = deadline === undefined ? undefined : deadlineTimer(deadline, this.#now);
              // A request with an id can be cancelled alone (`cancel`): out of the queue, or stopped.
              const cancelKey = chat.id === undefined ? undefined : cancelKeyOf(agent, session, chat.id);
              const cancel = cancelKey === undefined ? undefined : new AbortController();
              if (cancelKey !== undefined && cancel !== undefined) {
                this.#cancellable.set(cancelKey, cancel);
                cancelling = cancelKey;
                if (this.#isCancelled(cancelKey)) cancel.abort();
              }
              // Asked by a chat that renews a lease on this one: cancelled once the renewals stop.
              leased = this.watchLease(agent, session, request.lineage, request.lease);
              const stops = [timeout?.signal, cancel?.signal, leased?.signal].filter(
                (stop) => stop !== undefined,
              );
              const signal = stops.length <= 1 ? stops[0] : AbortSignal.any(stops);
              const running = actor.chat({
                ...(deadline === undefined ? {} : { deadline }),
                ...(signal === undefined ? {} : { signal }),
                ...(cancel === undefined ? {} : { withdraw: cancel.signal }),
                text: chat.text,
                type: chat.type,
                stackable: chat.stackable,
                depth: request.depth,
                ...(request.lineage === undefined ? {} : { lineage: request.lineage }),
                ...(request.traceparent === undefined ? {} : { traceparent: request.traceparent }),
                // Journaled with the chat: a chat resumed elsewhere answers this id's retries.
                ...(step === undefined || chat.id === undefined ? {} : { requestId: chat.id }),
              });
              if (step !== undefined) {
                // Queued now (in the journal, once flushed): only then is the id marked running,
                // so a retry after this host dies finds the chat to resume, or no mark and runs it.
                await actor.agent.journal?.flush();
                await dedupe?.claim(step.run);
              }
              outcome = await running;
            } catch (error) {
              failure = error;
            }
            isParked =
              outcome?.ok === false && chat.id !== undefined && actor.agent.parkedRequestId === chat.id;
          }
          reply =
            outcome === undefined
              ? { ok: false, error: sessionStartError(failure), ...echo }
              : chatReplyOf(session, outcome, echo);
          // Nothing ran when the session could not start: no record, so a retry runs it.
          if (step !== undefined) {
            await dedupe?.finish(step.run, reply, { ran: outcome !== undefined, parked: isParked });
          }
        }
        // Stored under the id: the journal need not keep the chat's answer any more.
        if (step !== undefined && chat.id !== undefined) {
          this.sessions.find(agent, session)?.agent.journal?.forgetAnswer(chat.id);
        }
        return this.#reply(message, reply, outcome?.ok === true ? outcome.chatId : undefined);
      } finally {
        leased?.close();
        // The chat is over: its deadline's timer would otherwise live on until the deadline.
        timeout?.clear();
        if (cancelling !== undefined) this.#cancellable.delete(cancelling);
        releaseShard();
        release();
      }
    } catch (error) {
      // Only a bug gets here: answer `internal` and keep serving.
      this.#log(`internal error answering ${message.subject}: ${describeFailure(error).message}`);
      return this.#reply(message, errorReply("internal", describeFailure(error).message));
    } finally {
      finished();
    }
  };

  /** Counts a request in flight (`close()` waits for them); the returned function ends it. */
  #track(): () => void {
    let end = () => {};
    const work = new Promise<void>((resolve) => {
      end = resolve;
    });
    this.#inFlight.add(work);
    this.#quiet?.begin();
    return () => {
      if (!this.#inFlight.delete(work)) return;
      this.#quiet?.end();
      end();
    };
  }

  /** The request's subject and payload checked: what it asks, or the `bad_request` to answer. */
  #check(message: BusMessage): Checked {
    if (message.malformed !== undefined)
      return { verb: "refused", reply: errorReply("bad_request", message.malformed) };
    const route = parseRequestSubject(this.prefix, message.subject);
    if (route === undefined) {
      const token = message.subject.split(".").at(-2) ?? "";
      return {
        verb: "refused",
        reply: errorReply("bad_request", `invalid agent name ${JSON.stringify(token)}`),
      };
    }
    const { agent } = route;
    if (!this.#agentNames.has(agent)) return { verb: "unserved", agent, requested: route.verb };
    if (route.verb === "control") {
      const parsed = parseControlRequest(message.data);
      if (!parsed.ok) return { verb: "refused", reply: parsed };
      return { verb: "control", agent, session: parsed.value.session, control: parsed.value };
    }
    const parsed = parseChatRequest(message.data);
    if (!parsed.ok) return { verb: "refused", reply: parsed };
    const echo = parsed.value.id === undefined ? {} : { id: parsed.value.id };
    const depth = readRequestDepth(message.data);
    if (!depth.ok) return { verb: "refused", reply: { ...depth, ...echo } };
    const approvals = readRequestApprovals(message.data);
    if (!approvals.ok) return { verb: "refused", reply: { ...approvals, ...echo } };
    const { session } = parsed.value;
    const tree = readLineageHeaders(message.headers);
    if (!tree.ok) return { verb: "refused", reply: { ...errorReply("bad_request", tree.message), ...echo } };
    const { lineage } = tree;
    if (lineage !== undefined && isOnChain(lineage.chain, agent, session)) {
      // That session is waiting, higher up, for this very question's answer: it would wait on itself.
      const message = `${agent}/${session} is already waiting on this chain (${describeChain(lineage.chain)}): asking it again would wait on itself`;
      return { verb: "refused", reply: { ...errorReply("cycle", message), ...echo } };
    }
    const lease = readParentLease(message.headers);
    if (!lease.ok)
      return { verb: "refused", reply: { ...errorReply("bad_request", lease.message), ...echo } };
    return {
      verb: "chat",
      agent,
      session,
      chat: parsed.value,
      depth: Math.max(depth.value, lineage?.depth ?? 0),
      approvals: approvals.value,
      lineage,
      traceparent: tree.traceparent,
      lease: lease.lease,
    };
  }

  /**
   * Where the request's session is. Alone, here: the session taken (a `stop` takes only a live
   * one: nothing runs in a session that is not). In a cluster, the session's owner decides: none
   * or this host, the session is taken here; another, reachable, the request is forwarded to it
   * (it answers the requester); another, gone, the request waits here for its lease to run out.
   * Taking the session can lose the race for its lease: then the request is placed again.
   */
  async #place(message: BusMessage, request: CheckedRequest): Promise<Placed> {
    const { agent, session, verb } = request;
    const cluster = this.#cluster;
    // A chat's refusals echo its `id`, as its answer would.
    const echo = request.verb === "chat" && request.chat.id !== undefined ? { id: request.chat.id } : {};
    for (let attempt = 0; ; attempt++) {
      let done = () => {};
      if (cluster !== undefined) {
        let location: Awaited<ReturnType<SessionCluster["locate"]>>;
        try {
          location = await cluster.locate(agent, session, forwardHopsOf(message));
        } catch (error) {
          const reason = describeFailure(error).message;
          const reply = { ...errorReply("unavailable", `cannot place the session: ${reason}`), ...echo };
          return { where: "sent", reply: this.#reply(message, reply) };
        }
        if (location.where === "unavailable") {
          const reply = { ...errorReply("unavailable", location.reason), ...echo };
          return { where: "sent", reply: this.#reply(message, reply) };
        }
        if (location.where === "forward") {
          const refused = cluster.forward(location.subject, agent, verb, message);
          return {
            where: "sent",
            reply: refused === undefined ? { ok: true } : this.#reply(message, { ...refused, ...echo }),
          };
        }
        done = this.holdShard(location.shard);
      }
      const shed = this.#shed(request);
      if (shed !== undefined) {
        done();
        return { where: "sent", reply: this.#reply(message, { ...shed, ...echo }) };
      }
      if (verb === "chat") done = this.#countChat(done);
      if (
        request.verb === "control" &&
        (request.control.command === "stop" || request.control.command === "cancel")
      ) {
        return { where: "here", actor: this.sessions.find(agent, session), done };
      }
      try {
        return {
          where: "here",
          actor: await this.sessions.open(agent, session, { isChat: verb === "chat" }),
          done,
        };
      } catch (error) {
        done();
        if (error instanceof SessionOwnedElsewhereError && attempt <= 2) continue;
        return { where: "failed", error };
      }
    }
  }

  /**
   * The refusal of a new chat while the host has as many chats in progress as it takes, or its loop
   * runs too far behind (see {@link AgentHostOptions.maxChats}, {@link AgentHostOptions.maxLoopDelayMs});
   * undefined when the request is taken.
   */
  #shed(request: CheckedRequest): Extract<ChatReply, { ok: false }> | undefined {
    if (request.verb !== "chat" || request.depth > 0) return undefined;
    const pressure = this.#pressure;
    let rule: string;
    let message: string;
    if (this.#maxChats !== undefined && this.#chatsHere >= this.#maxChats) {
      rule = "max-chats";
      message = `the host is overloaded: it has ${this.#chatsHere} chats in progress (its limit is ${this.#maxChats}), so it takes no new chat now; retry shortly`;
    } else if (pressure?.isOverloaded === true) {
      rule = "max-loop-delay";
      message = `the host is overloaded: its event loop runs ${pressure.delayMs} ms behind (over ${pressure.maxDelayMs} ms), so it takes no new chat now; retry shortly`;
    } else return undefined;
    this.#refused(rule, `refused a chat for ${request.agent}/${request.session}: ${message}`);
    return {
      ...errorReply("overloaded", message),
      ...(request.chat.id === undefined ? {} : { id: request.chat.id }),
    };
  }

  /** Counts a chat placed here until `done` (its answer is out). */
  #countChat(done: () => void): () => void {
    this.#chatsHere += 1;
    let isCounted = true;
    return () => {
      if (isCounted) {
        isCounted = false;
        this.#chatsHere -= 1;
      }
      done();
    };
  }

  /** Chats placed on this host and not answered yet (see {@link AgentHostOptions.maxChats}). */
  get chatsInProgress(): number {
    return this.#chatsHere;
  }

  /** Hands a control verb to the session (opened again if it stopped since it was placed). */
  async #control(
    request: CheckedRequest & { verb: "control" },
    placed: SessionActor | undefined,
  ): Promise<ControlReply> {
    const { control, agent, session } = request;
    // Nothing runs in a session that is not live: no need to build it just to stop it.
    if (control.command === "stop") return placed?.stop() ?? { ok: true };
    if (control.command === "cancel") return this.#cancelChat(cancelKeyOf(agent, session, control.id ?? ""));
    try {
      let actor = placed ?? (await this.sessions.open(agent, session));
      // Checked in the same tick as the command is queued, so a passivation cannot slip in between.
      while (actor.isStopped) actor = await this.sessions.open(agent, session);
      if (control.command === "new") return await actor.reset();
      if (control.command === "compact") return await actor.compact(control.topic);
      // The session may have had to be built: its approval may be parked in the history (a restart).
      return await this.decideToolCall(actor, {
        toolCallId: control.toolCallId ?? "",
        approved: control.command === "approve",
        ...(control.reason !== undefined ? { reason: control.reason } : {}),
        ...(control.arguments !== undefined ? { arguments: control.arguments } : {}),
      });
    } catch (error) {
      return { ok: false, error: sessionStartError(error) };
    }
  }

  /**
   * `cancel`: the chat request with this id stops here, whether queued (taken out, it never runs)
   * or running; one not here yet is answered `cancelled` when it comes. Other chats go on.
   */
  #cancelChat(key: string): ControlReply {
    const now = this.#now();
    for (const [cancelled, lapses] of this.#cancelled) {
      if (lapses > now && this.#cancelled.size < MAX_CANCELLED_MARKS) break;
      this.#cancelled.delete(cancelled);
    }
    this.#cancelled.set(key, now + CANCELLED_MARK_MS);
    this.#cancellable.get(key)?.abort();
    return { ok: true };
  }

  #isCancelled(key: string): boolean {
    const lapses = this.#cancelled.get(key);
    return lapses !== undefined && lapses > this.#now();
  }

  /**
   * Watches the lease the asking chat holds on a chat it asked, when it sent one (and names the
   * call that waits): the returned signal aborts, with one log line, once its renewals stop. Chat
   * requests on our contract and Agent Protocol prompts both watch it.
   */
  watchLease(
    agent: string,
    session: string,
    lineage: ChatLineage | undefined,
    lease: ParentLease | undefined,
  ): { signal: AbortSignal; close(): void } | undefined {
    const toolCallId = lineage?.parent.toolCallId;
    if (lease === undefined || lineage === undefined || toolCallId === undefined) return undefined;
    const watch = watchParentLease(this.#bus, lease, { ...lineage.parent, toolCallId });
    watch.signal.addEventListener(
      "abort",
      () =>
        this.#log(
          `stopping the chat of ${agent}/${session}: ${describeFailure(watch.signal.reason).message}`,
        ),
      { once: true },
    );
    return watch;
  }

  /** When a chat starting now must end: its own `--max-chat-time`, or its parent's deadline if sooner. */
  #deadlineOf(lineage: ChatLineage | undefined): number | undefined {
    const own = this.#maxChatTimeMs === undefined ? undefined : this.#now() + this.#maxChatTimeMs;
    const inherited = lineage?.deadline;
    if (own === undefined) return inherited;
    return inherited === undefined ? own : Math.min(own, inherited);
  }

  /**
   * Decides a tool call the session's chat waits on, whichever door the decision came by (the
   * control subject's `approve` / `deny`, an Agent Protocol `query` answer): a call this session
   * holds is decided here; a call held further down its agent tree (its approval bubbled up to this
   * root) is handed to the session that holds it. Either way the holder's own one-time,
   * argument-bound check decides.
   */
  async decideToolCall(actor: SessionActor, decision: ToolApprovalDecision): Promise<ControlReply> {
    const holder = actor.agent.delegatedApproval?.(decision.toolCallId);
    if (holder !== undefined) return this.#decideBelow(holder, decision);
    return actor.decideToolCall(decision);
  }

  /**
   * Hands an approval decision taken at the root of an agent tree to the session below that holds
   * the call (its own one-time, argument-bound check decides), and answers with its answer.
   */
  async #decideBelow(
    holder: { agent: string; session: string },
    decision: ToolApprovalDecision,
  ): Promise<ControlReply> {
    const control: ControlRequest = {
      session: holder.session,
      command: decision.approved ? "approve" : "deny",
      toolCallId: decision.toolCallId,
      ...(decision.reason === undefined ? {} : { reason: decision.reason }),
      ...(decision.arguments === undefined ? {} : { arguments: decision.arguments }),
    };
    try {
      const reply = await this.#bus.request(
        controlSubject(this.prefix, holder.agent),
        JSON.stringify(control),
        { timeoutMs: DECIDE_BELOW_TIMEOUT_MS },
      );
      const parsed = parseControlReply(reply.data);
      if (parsed.ok) return parsed.value;
      return errorReply("internal", `${holder.agent}/${holder.session} sent an unreadable answer`);
    } catch (error) {
      const reason = describeFailure(error).message;
      return errorReply(
        "internal",
        `cannot reach ${holder.agent}/${holder.session}, which holds the call: ${reason}`,
      );
    }
  }

  /**
   * Sends the reply and resolves with what was sent; one over the bus's max payload becomes
   * `reply_too_large`, never a silent drop.
   */
  #reply<T extends ChatReply | ControlReply>(
    message: BusMessage,
    reply: T,
    chatId?: string,
  ): T | Extract<ChatReply, { ok: false }> {
    if (message.reply === undefined) return reply;
    const data = JSON.stringify(reply);
    if (!isOverMaxPayload(data, this.#bus.maxPayload)) {
      this.#bus.respond(message, data);
      return reply;
    }
    const tooLarge = replyTooLarge(Buffer.byteLength(data, "utf8"), this.#bus.maxPayload, chatId, reply);
    this.#log(`answered ${message.subject} with reply_too_large: ${tooLarge.error.message}`);
    this.#bus.respond(message, JSON.stringify(tooLarge));
    return tooLarge;
  }
}

/** The `reply_too_large` answer: the client reads the full result from the history by `chatId`. */
function replyTooLarge(
  bytes: number,
  maxPayload: number,
  chatId: string | undefined,
  reply: ChatReply | ControlReply,
): Extract<ChatReply, { ok: false }> {
  const where = chatId === undefined ? "" : ` (chat ${chatId})`;
  return {
    ...errorReply(
      "reply_too_large",
      `the reply is ${bytes} bytes, over the bus's ${maxPayload}-byte limit; the full result is in the session history${where}`,
    ),
    ...(chatId === undefined ? {} : { chatId }),
    ...("id" in reply && reply.id !== undefined ? { id: reply.id } : {}),
  };
}

/** Why a session could not take a message: the host is closing, full, or the session failed to start. */
export function sessionStartError(error: unknown): SessionError {
  // The host's own refusals answer with their code from the table; a failed start is `internal`.
  if (
    error instanceof SessionManagerClosedError ||
    error instanceof SessionManagerOverloadedError ||
    error instanceof HostMemoryOverloadedError
  ) {
    return describeFailure(error);
  }
  // Its shard changed owner meanwhile: asking again reaches the host that serves it now.
  if (error instanceof LeaseLostError) {
    return { code: "unavailable", message: `cannot start the session: ${error.message}; retry the request` };
  }
  return { code: "internal", message: `cannot start the session: ${describeFailure(error).message}` };
}

/** How long a `cancel` waits for its chat request to arrive (one sent just before it, or a retry). */
const CANCELLED_MARK_MS = 10 * 60_000;
/** Cancel marks kept at most (the oldest go first). */
const MAX_CANCELLED_MARKS = 10_000;

function cancelKeyOf(agent: string, session: string, id: string): string {
  return `${agent}\u0000${session}\u0000${id}`;
}
