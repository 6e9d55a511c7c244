import { getHeapStatistics } from "node:v8";
import pLimit from "p-limit";
import { settlesWithin } from "../cluster/bounded-wait.js";
import { AgentloopError } from "../errors/agentloop-error.js";
import { createRefusalLog, type RefusalLog } from "./refusal-log.js";
import type { SessionActor } from "./session-actor.js";

/** Idle sessions are passivated after this long by default, freeing their memory; the next message restores them from history. */
export const DEFAULT_IDLE_TIMEOUT_MS = 12 * 60 * 60 * 1000;

/** How many sessions may be live at once by default (`--max-sessions`). */
export const DEFAULT_MAX_SESSIONS = 10_000;

/** The most session memory a host holds by default (`--max-memory-bytes`), when the heap allows. */
const MEMORY_BUDGET_CAP_BYTES = 512 * 1024 * 1024;

/**
 * The default budget for the messages a host's live sessions hold in memory: 512 MiB, or half of
 * V8's heap limit when that is smaller (the rest is for everything else a host holds).
 */
export const DEFAULT_MAX_MEMORY_BYTES = Math.min(
  MEMORY_BUDGET_CAP_BYTES,
  Math.floor(getHeapStatistics().heap_size_limit / 2),
);

/** The longest pause between two idleness checks. */
const MAX_SWEEP_INTERVAL_MS = 60_000;
/** How long a stopping session waits for its journal's last writes (see `#stop`). */
const JOURNAL_FLUSH_WAIT_MS = 10_000;

/** How many sessions are compacted at once when many go idle together. */
const PASSIVATION_CONCURRENCY = 4;

/** Timers the manager uses, injected so tests control time. */
export interface ManagerTimers {
  setInterval(callback: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: ManagerTimers = {
  setInterval: (callback, ms) => {
    const handle = setInterval(callback, ms);
    handle.unref();
    return handle;
  },
  clearInterval: (handle) => clearInterval(handle as NodeJS.Timeout),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface SessionManagerOptions {
  /** Builds a session from its agent definition, restoring its history. May reject: retried next time. */
  createSession(agent: string, session: string): Promise<SessionActor>;
  /** Idle time before a session is passivated; default 12 h. */
  idleTimeoutMs?: number;
  /**
   * Live sessions at most (default 10,000). At the cap a new session first passivates the least
   * recently used idle one; with none idle it is refused with {@link SessionManagerOverloadedError}
   * (logged naming the rule `max-sessions`, at most once a minute).
   */
  maxSessions?: number;
  /**
   * Bytes the live sessions' messages may hold in memory, all together (an estimate each session
   * keeps up to date; default {@link DEFAULT_MAX_MEMORY_BYTES}). Over it, the least recently used
   * idle sessions are passivated; with none idle, new chats are refused with
   * {@link HostMemoryOverloadedError} until memory is back under it.
   */
  maxMemoryBytes?: number;
  /** How often idleness is checked; default min(idle timeout, 1 min). `start()` begins checking. */
  sweepIntervalMs?: number;
  /** Clock in ms since the epoch. */
  now?: () => number;
  timers?: ManagerTimers;
  /** One-line notices (a failed passivation compaction, a failed creation). Default: none. */
  log?: (line: string) => void;
  /** Leases: a live session has stopped (passivated, dropped, closed) and let go of its history. */
  onSessionStopped?: (agent: string, session: string) => void;
  /**
   * Sorts the live sessions into groups (a cluster's shards) so {@link SessionManager.liveSessionsIn}
   * lists one group's without going through every live session. Must give a session the same group
   * every time. Default: no groups.
   */
  groupOf?: (agent: string, session: string) => number;
}

/** Every session slot is taken by a busy session: no new session can start now. */
export class SessionManagerOverloadedError extends AgentloopError {
  readonly code = "overloaded";
  /** Another try, later, may find a free slot. */
  readonly retryable = true;
  readonly maxSessions: number;

  constructor(maxSessions: number) {
    super(
      `the host is at its limit of ${maxSessions} live session${maxSessions === 1 ? "" : "s"} and none is idle; try again later`,
    );
    this.maxSessions = maxSessions;
  }
}

/** The live sessions hold more memory than the host's budget and none is idle: no chat is taken now. */
export class HostMemoryOverloadedError extends AgentloopError {
  readonly code = "overloaded";
  /** Sessions finishing their chats become idle and can be passivated: a later try may get in. */
  readonly retryable = true;
  readonly bytes: number;
  readonly maxMemoryBytes: number;

  constructor(bytes: number, maxMemoryBytes: number) {
    super(
      `the host's sessions hold about ${bytes} bytes, over its memory budget of ${maxMemoryBytes} bytes, and none is idle; try again later`,
    );
    this.bytes = bytes;
    this.maxMemoryBytes = maxMemoryBytes;
  }
}

/** The host is closing: no session is created any more. */
export class SessionManagerClosedError extends AgentloopError {
  readonly code = "host_closing";
  readonly retryable = false;

  constructor() {
    super("the host is shutting down");
  }
}

/**
 * Owns the live sessions. A session is created on first use; concurrent first uses
 * share one creation and a failed creation is forgotten, so the next use tries again. Idle
 * sessions are passivated: compacted (a failure is logged and eviction goes on, the history is
 * already persisted), checked for idleness again (a message may have arrived meanwhile), then
 * stopped. The next message builds the session again from its history.
 *
 * At most `maxSessions` are live: a creation takes a slot before it starts (so concurrent ones
 * cannot overshoot), passivating the least recently used idle session when none is free, and is
 * refused as overloaded when every live session is busy.
 *
 * The live sessions' memory is bounded by bytes too: each session keeps an estimate of what its
 * messages hold and reports changes; over `maxMemoryBytes` the least recently used idle sessions
 * are passivated (without the compaction: their history is already stored, and relief should not
 * wait for a model), and while every session over the budget is busy, new chats are refused as
 * overloaded. A busy session, or one awaiting a tool approval, is never passivated.
 */
export class SessionManager {
  readonly #createSession: (agent: string, session: string) => Promise<SessionActor>;
  readonly #idleTimeoutMs: number;
  readonly #maxSessions: number;
  readonly #sweepIntervalMs: number;
  readonly #now: () => number;
  readonly #timers: ManagerTimers;
  readonly #log: (line: string) => void;
  readonly #refused: RefusalLog;
  readonly #onSessionStopped: (agent: string, session: string) => void;
  readonly #live = new Map<string, SessionActor>();
  readonly #groupOf: ((agent: string, session: string) => number) | undefined;
  /** The keys of the live sessions by group (see {@link SessionManagerOptions.groupOf}). */
  readonly #byGroup = new Map<number, Set<string>>();
  readonly #creating = new Map<string, Promise<SessionActor>>();
  /** Shutdowns in progress: a new instance waits for the old one to let go of the history. */
  readonly #stopping = new Map<string, Promise<void>>();
  readonly #passivating = new Set<string>();
  readonly #maxMemoryBytes: number;
  /** Each live session's last reported memory estimate, and their sum. */
  readonly #bytes = new Map<SessionActor, number>();
  #totalBytes = 0;
  #relieving: Promise<void> | undefined;
  /** Slots held by creations that are not live yet: live + this never exceeds the cap. */
  #reservedSlots = 0;
  #sweepHandle: unknown;
  #sweeping: Promise<number> | undefined;
  #isClosed = false;

  constructor(options: SessionManagerOptions) {
    this.#createSession = options.createSession;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
    this.#maxSessions = Math.max(1, options.maxSessions ?? DEFAULT_MAX_SESSIONS);
    this.#maxMemoryBytes = Math.max(1, options.maxMemoryBytes ?? DEFAULT_MAX_MEMORY_BYTES);
    this.#sweepIntervalMs =
      options.sweepIntervalMs ?? Math.max(1, Math.min(this.#idleTimeoutMs, MAX_SWEEP_INTERVAL_MS));
    this.#now = options.now ?? Date.now;
    this.#timers = options.timers ?? realTimers;
    this.#log = options.log ?? (() => {});
    this.#refused = createRefusalLog(this.#log, { now: this.#now });
    this.#onSessionStopped = options.onSessionStopped ?? (() => {});
    this.#groupOf = options.groupOf;
  }

  /** Live sessions. */
  get size(): number {
    return this.#live.size;
  }

  /** Approximately how many bytes the live sessions' messages hold in memory. */
  get memoryBytes(): number {
    return this.#totalBytes;
  }

  /** Starts the periodic idleness check. */
  start(): void {
    if (this.#sweepHandle !== undefined || this.#isClosed) return;
    this.#sweepHandle = this.#timers.setInterval(() => void this.sweep(), this.#sweepIntervalMs);
  }

  /** The live sessions, as `[agent, session]` pairs. */
  /** Whether a session is being started here, or a live one has work running or queued. */
  get hasBusySession(): boolean {
    if (this.#creating.size > 0) return true;
    for (const actor of this.#live.values()) if (!actor.isIdle) return true;
    return false;
  }

  *liveSessions(): Generator<[string, string]> {
    for (const key of this.#live.keys()) yield splitKey(key);
  }

  /**
   * The live sessions of one group (a shard), as `[agent, session]` pairs: as many steps as the
   * group has sessions, whatever the number of live sessions. Without `groupOf`, none.
   */
  liveSessionsIn(group: number): [string, string][] {
    return [...(this.#byGroup.get(group) ?? [])].map(splitKey);
  }

  /** The live session, without creating one. */
  find(agent: string, session: string): SessionActor | undefined {
    const actor = this.#live.get(keyOf(agent, session));
    return actor === undefined || actor.isStopped ? undefined : actor;
  }

  /** The session, created (from its history) on first use. */
  get(agent: string, session: string): Promise<SessionActor> {
    if (this.#isClosed) return Promise.reject(new SessionManagerClosedError());
    const key = keyOf(agent, session);
    const live = this.#live.get(key);
    if (live !== undefined && !live.isStopped) return Promise.resolve(live);
    const pending = this.#creating.get(key);
    if (pending !== undefined) return pending;
    let hasSlot = false;
    const creation = (async () => {
      await this.#stopping.get(key);
      if (this.#isClosed) throw new SessionManagerClosedError();
      await this.#takeSlot(key);
      hasSlot = true;
      return this.#createSession(agent, session);
    })().then(
      (actor) => {
        this.#creating.delete(key);
        // The slot passes from the creation to the live session in the same tick.
        this.#reservedSlots--;
        if (this.#isClosed) {
          void actor.shutdown("the host is shutting down");
          throw new SessionManagerClosedError();
        }
        this.#setLive(key, actor);
        this.#account(actor);
        return actor;
      },
      (error: unknown) => {
        this.#creating.delete(key);
        if (hasSlot) this.#reservedSlots--;
        throw error;
      },
    );
    this.#creating.set(key, creation);
    return creation;
  }

  /**
   * The live session, created on first use, for a caller about to hand it a message: `isChat`
   * checks the memory budget first — over it, idle sessions are passivated, and with none left the
   * chat is refused ({@link HostMemoryOverloadedError}); commands (`new`, `compact`…) always pass.
   * A passivation may stop the session after this resolves: the caller checks `isStopped` in the
   * same tick as it sends its message, and opens it again if it was (see {@link use}).
   */
  async open(agent: string, session: string, options: { isChat?: boolean } = {}): Promise<SessionActor> {
    if (options.isChat === true && this.#totalBytes > this.#maxMemoryBytes) {
      await this.#relieveMemory();
      if (this.#totalBytes > this.#maxMemoryBytes) {
        const refusal = new HostMemoryOverloadedError(this.#totalBytes, this.#maxMemoryBytes);
        this.#refused("max-memory-bytes", `refused a chat for ${agent}/${session}: ${refusal.message}`);
        throw refusal;
      }
    }
    for (;;) {
      const actor = await this.get(agent, session);
      if (!actor.isStopped) return actor;
      if (this.#live.get(keyOf(agent, session)) === actor) this.#deleteLive(keyOf(agent, session));
    }
  }

  /**
   * Calls `use` with the live session ({@link open}) in the same tick as the check that it is
   * running, so a passivation that stops it cannot slip in between (a stopped one is replaced by a
   * fresh one).
   */
  async use<T>(
    agent: string,
    session: string,
    use: (actor: SessionActor) => T,
    options: { isChat?: boolean } = {},
  ): Promise<T> {
    for (;;) {
      const actor = await this.open(agent, session, options);
      if (!actor.isStopped) return use(actor);
    }
  }

  /** Passivates every session idle for longer than the timeout; resolves with how many were stopped. */
  sweep(): Promise<number> {
    this.#sweeping ??= this.#sweep().finally(() => {
      this.#sweeping = undefined;
    });
    return this.#sweeping;
  }

  /**
   * Stops accepting new sessions, lets running work finish for up to `graceMs` (cut short when
   * `hurry` aborts), then shuts every session down: what still runs is cancelled and answered
   * `cancelled`, and resolves once every cancelled chat has written its history.
   */
  async close(options: { graceMs?: number; hurry?: AbortSignal } = {}): Promise<void> {
    this.#isClosed = true;
    if (this.#sweepHandle !== undefined) this.#timers.clearInterval(this.#sweepHandle);
    this.#sweepHandle = undefined;
    await Promise.allSettled([...this.#creating.values()]);
    const actors = [...this.#live.values()];
    // A chat awaiting a tool approval would hold the grace period for nothing: it is parked (its
    // approval stays in the history) and the next host takes it up.
    for (const actor of actors) actor.parkPendingApproval();
    const graceMs = options.graceMs ?? 0;
    const { hurry } = options;
    if (graceMs > 0 && hurry?.aborted !== true) {
      let handle: unknown;
      let onHurry = () => {};
      const expired = new Promise<void>((resolve) => {
        handle = this.#timers.setTimeout(resolve, graceMs);
        onHurry = resolve;
        hurry?.addEventListener("abort", onHurry, { once: true });
      });
      await Promise.race([Promise.all(actors.map((actor) => actor.whenIdle())), expired]);
      this.#timers.clearTimeout(handle);
      hurry?.removeEventListener("abort", onHurry);
    }
    this.#live.clear();
    this.#byGroup.clear();
    await Promise.all([
      ...actors.map((actor) => this.#stop(actor, "the host is shutting down")),
      ...this.#stopping.values(),
    ]);
  }

  /**
   * Leases: stops a live session at once, whatever it is doing (its lease is gone):
   * what runs is cancelled and every waiter answered `cancelled`. The next use builds it again.
   */
  drop(
    agent: string,
    session: string,
    reason: string,
    code: "cancelled" | "unavailable" = "cancelled",
  ): Promise<void> {
    const key = keyOf(agent, session);
    const actor = this.#live.get(key);
    if (actor === undefined) return Promise.resolve();
    this.#deleteLive(key);
    const stopping = this.#stop(actor, reason, code).finally(() => {
      if (this.#stopping.get(key) === stopping) this.#stopping.delete(key);
    });
    this.#stopping.set(key, stopping);
    return stopping;
  }

  #setLive(key: string, actor: SessionActor): void {
    this.#live.set(key, actor);
    if (this.#groupOf === undefined) return;
    const group = this.#groupOf(...splitKey(key));
    let keys = this.#byGroup.get(group);
    if (keys === undefined) {
      keys = new Set();
      this.#byGroup.set(group, keys);
    }
    keys.add(key);
  }

  #deleteLive(key: string): void {
    if (!this.#live.delete(key) || this.#groupOf === undefined) return;
    const group = this.#groupOf(...splitKey(key));
    const keys = this.#byGroup.get(group);
    keys?.delete(key);
    if (keys?.size === 0) this.#byGroup.delete(group);
  }

  /** Shuts a session down, then tells {@link SessionManagerOptions.onSessionStopped}. */
  async #stop(
    actor: SessionActor,
    reason: string,
    code: "cancelled" | "unavailable" = "cancelled",
  ): Promise<void> {
    this.#forget(actor);
    try {
      await actor.shutdown(reason, code);
      // The end of the session's last chat may still be on its way to the journal (its removal
      // goes out after the chat's last appends): a session built again here at once would read the
      // journal without it and resume a chat that had ended, its model and tools run again. The
      // next build of this session waits for this stop, so the stop lasts until the journal has
      // stored what it was given; bounded, since with NATS away that waits for a reconnect.
      const journal = actor.agent.journal;
      if (journal !== undefined) await settlesWithin(journal.flush(), JOURNAL_FLUSH_WAIT_MS);
    } finally {
      this.#onSessionStopped(actor.name, actor.session);
    }
  }

  /** Counts a session that went live, and follows its estimate from now on. */
  #account(actor: SessionActor): void {
    this.#bytes.set(actor, actor.memoryBytes);
    this.#totalBytes += actor.memoryBytes;
    actor.onMemoryChanged(this.#memoryChanged);
    if (this.#totalBytes > this.#maxMemoryBytes) void this.#relieveMemory();
  }

  /** Every session's memory listener: one function, not a closure per live session. */
  readonly #memoryChanged = (bytes: number, actor: SessionActor): void => {
    const previous = this.#bytes.get(actor);
    if (previous === undefined) return;
    this.#bytes.set(actor, bytes);
    this.#totalBytes += bytes - previous;
    if (this.#totalBytes > this.#maxMemoryBytes) void this.#relieveMemory();
  };

  /** A session stopping gives its memory back. */
  #forget(actor: SessionActor): void {
    const bytes = this.#bytes.get(actor);
    if (bytes === undefined) return;
    this.#bytes.delete(actor);
    this.#totalBytes -= bytes;
  }

  /**
   * Passivates the least recently used idle sessions until the live ones are back under the
   * memory budget (or none idle is left). One relief at a time; callers share it.
   */
  #relieveMemory(): Promise<void> {
    this.#relieving ??= (async () => {
      const tried = new Set<SessionActor>();
      while (this.#totalBytes > this.#maxMemoryBytes && !this.#isClosed) {
        const victim = this.#leastRecentlyUsedIdle(tried);
        if (victim === undefined) return;
        tried.add(victim[1]);
        await this.#passivate(victim[0], victim[1], { forMemory: true });
      }
    })().finally(() => {
      this.#relieving = undefined;
    });
    return this.#relieving;
  }

  /**
   * Reserves a slot for a new session: a free one, else one an idle session gives up (least
   * recently used first). Resolves once the slot is held; rejects when every live session is busy.
   */
  async #takeSlot(key: string): Promise<void> {
    for (;;) {
      if (this.#isClosed) throw new SessionManagerClosedError();
      if (this.#live.size + this.#reservedSlots < this.#maxSessions) {
        this.#reservedSlots++;
        return;
      }
      const victim = this.#leastRecentlyUsedIdle();
      if (victim === undefined) {
        const refusal = new SessionManagerOverloadedError(this.#maxSessions);
        this.#refused("max-sessions", `refused a new session ${key}: ${refusal.message}`);
        throw refusal;
      }
      // On success the passivation hands the freed slot over (see #passivate): nobody else can take it.
      if (await this.#passivate(victim[0], victim[1], { forRoom: true })) return;
    }
  }

  /** The idle session to give up its slot: the longest unused one, not already being passivated. */
  #leastRecentlyUsedIdle(excluded?: ReadonlySet<SessionActor>): [string, SessionActor] | undefined {
    let victim: [string, SessionActor] | undefined;
    for (const [key, actor] of this.#live) {
      if (excluded?.has(actor)) continue;
      // A session nobody has used yet is on its way to its first caller: not a candidate.
      if (!actor.isIdle || !actor.hasHadMessages || actor.hasPendingApproval || this.#passivating.has(key))
        continue;
      if (victim === undefined || actor.lastActivityAt < victim[1].lastActivityAt) victim = [key, actor];
    }
    return victim;
  }

  async #sweep(): Promise<number> {
    // Runs every minute over every live session: an idle host's pass makes no copy of them all.
    const candidates: Array<[string, SessionActor]> = [];
    this.#live.forEach((actor, key) => {
      if (this.#isPassivatable(actor)) candidates.push([key, actor]);
    });
    if (candidates.length === 0) return 0;
    const limit = pLimit(PASSIVATION_CONCURRENCY);
    const results = await Promise.all(
      candidates.map(([key, actor]) => limit(() => this.#passivate(key, actor))),
    );
    return results.filter(Boolean).length;
  }

  #isPassivatable(actor: SessionActor): boolean {
    // A chat parked awaiting a tool approval keeps its session: the approval must find it as it was.
    return (
      actor.isIdle && !actor.hasPendingApproval && this.#now() - actor.lastActivityAt >= this.#idleTimeoutMs
    );
  }

  /**
   * Compacts, re-checks and stops one session. `forRoom`: passivated to make room for a new
   * session, idle time regardless; its slot is reserved for that session the moment it is freed.
   * `forMemory`: passivated to bring the host under its memory budget, idle time regardless and
   * without the compaction (relief must not wait for a model; the history is already stored).
   */
  async #passivate(
    key: string,
    actor: SessionActor,
    options: { forRoom?: boolean; forMemory?: boolean } = {},
  ): Promise<boolean> {
    const isStillPassivatable = () =>
      options.forRoom || options.forMemory
        ? actor.isIdle && !actor.hasPendingApproval
        : this.#isPassivatable(actor);
    if (this.#passivating.has(key)) return false;
    this.#passivating.add(key);
    try {
      // Nothing to summarise in an empty (or already one-message) context: skip the model call.
      if (!options.forMemory && actor.agent.messages.length > 1) {
        const outcome = await actor.compact(undefined, { touch: false });
        if (!outcome.ok) {
          this.#log(
            `passivating ${key}: compaction failed (${outcome.error.message}); stopping it anyway, its history is saved`,
          );
        }
      }
      if (this.#isClosed || this.#live.get(key) !== actor || !isStillPassivatable()) return false;
      this.#deleteLive(key);
      if (options.forRoom) this.#reservedSlots++;
      const stopping = this.#stop(actor, "the session was passivated").finally(() => {
        if (this.#stopping.get(key) === stopping) this.#stopping.delete(key);
      });
      this.#stopping.set(key, stopping);
      await stopping;
      return true;
    } finally {
      this.#passivating.delete(key);
    }
  }
}

function keyOf(agent: string, session: string): string {
  return `${agent}/${session}`;
}

function splitKey(key: string): [string, string] {
  const slash = key.indexOf("/");
  return [key.slice(0, slash), key.slice(slash + 1)];
}
