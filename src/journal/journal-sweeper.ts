import { describeError } from "../errors/describe-error.js";
import type { ChatJournal } from "./chat-journal.js";
import type { ResumeCounts } from "./resume-counts.js";

/** Sessions the sweeper activates per second at most, unless told otherwise. */
export const DEFAULT_RESUMES_PER_SECOND = 50;

/** The sweeper's sense of time: injected by tests, so the rate bound is checked without waiting. */
export interface SweepClock {
  now(): number;
  /** Resolves after `ms`, or early once `signal` aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

const realClock: SweepClock = {
  now: () => performance.now(),
  sleep: (ms, signal) =>
    new Promise((resolve) => {
      if (signal.aborted) return resolve();
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      timer.unref();
      signal.addEventListener("abort", done, { once: true });
    }),
};

/**
 * The part of the host's session manager a sweep uses: whether a session is live here, and
 * starting one (which replays its journal).
 */
export interface SweptSessions {
  find(agent: string, session: string): unknown;
  use<T>(agent: string, session: string, use: () => T): Promise<T>;
}

/** Who else may own a session: the cluster's lease view (undefined when this host could take it). */
export interface SessionOwnership {
  ownerElsewhere(agent: string, session: string): Promise<unknown>;
}

export interface JournalSweeperOptions {
  journal: ChatJournal;
  sessions: SweptSessions;
  /** The agents this host serves: other agents' entries are left for their hosts. */
  agents: readonly string[];
  /**
   * Several hosts on one NATS system: a session whose lease another host holds is left to it; one whose
   * owner died is taken once its lease expired. Without it this host owns every session: one sweep.
   */
  ownership?: SessionOwnership;
  /** How often to look again for sessions whose owner died (with `ownership`). */
  intervalMs?: number;
  /**
   * Sessions activated per second at most (default {@link DEFAULT_RESUMES_PER_SECOND}). A host
   * that died holding thousands of sessions leaves thousands of journals; activating them all at
   * once would start that many model requests and history reads together. Sessions a client
   * touches are resumed at once anyway, outside this bound.
   */
  maxResumesPerSecond?: number;
  /** Where the resumes are counted (first touch vs. sweeper), shared with the session factory. */
  counts?: ResumeCounts;
  clock?: SweepClock;
  log?: (line: string) => void;
}

/**
 * Resume after a crash: finds the sessions whose host stopped with work unfinished — a journal entry and no
 * live owner — and activates them here. Activating a session resumes its journal (see
 * `SessionActor.resumeUnfinished`, called by the host for every session it creates), so the
 * unfinished chat and the queued ones run without waiting for a new message.
 *
 * At start it sweeps once; with several hosts it sweeps again every `intervalMs`, which is how a
 * dead host's sessions move to a live one within the lease TTL plus one interval. Activations are
 * paced to `maxResumesPerSecond`, so a large failover drains steadily instead of all at once.
 */
export class JournalSweeper {
  readonly #options: JournalSweeperOptions;
  readonly #served: ReadonlySet<string>;
  #timer: NodeJS.Timeout | undefined;
  #sweeping: Promise<number> | undefined;
  #isClosed = false;
  readonly #closing = new AbortController();
  readonly #rate: number;
  readonly #clock: SweepClock;

  constructor(options: JournalSweeperOptions) {
    const rate = options.maxResumesPerSecond ?? DEFAULT_RESUMES_PER_SECOND;
    if (!Number.isInteger(rate) || rate < 1) {
      throw new RangeError(`maxResumesPerSecond must be a positive whole number, got ${rate}`);
    }
    this.#options = options;
    this.#served = new Set(options.agents);
    this.#rate = rate;
    this.#clock = options.clock ?? realClock;
  }

  /** Sweeps now, and (with ownership) every interval after. Resolves with the first sweep's count. */
  start(): Promise<number> {
    const first = this.sweep();
    const { ownership, intervalMs } = this.#options;
    if (ownership !== undefined && intervalMs !== undefined) {
      this.#timer = setInterval(() => void this.sweep(), intervalMs);
      this.#timer.unref();
    }
    return first;
  }

  /** One pass: activates every orphaned journaled session; resolves with how many it activated. */
  sweep(): Promise<number> {
    this.#sweeping ??= this.#sweepOnce().finally(() => {
      this.#sweeping = undefined;
    });
    return this.#sweeping;
  }

  async #sweepOnce(): Promise<number> {
    const { journal, sessions, ownership, log = () => {} } = this.#options;
    let entries: Awaited<ReturnType<ChatJournal["list"]>>;
    try {
      entries = await journal.list();
    } catch (error) {
      log(`cannot read the chat journal: ${describeError(error)}; unfinished chats are not resumed now`);
      return 0;
    }
    const { counts } = this.#options;
    let activated = 0;
    let windowStart = this.#clock.now();
    let inWindow = 0;
    for (const { agent, session } of entries) {
      if (this.#isClosed) break;
      if (!this.#served.has(agent) || sessions.find(agent, session) !== undefined) continue;
      try {
        if (ownership !== undefined && (await ownership.ownerElsewhere(agent, session)) !== undefined)
          continue;
        if (inWindow >= this.#rate) {
          // This second's share is used: wait for the next one before activating more.
          const wait = windowStart + 1000 - this.#clock.now();
          if (wait > 0) await this.#clock.sleep(wait, this.#closing.signal);
          if (this.#isClosed) break;
          windowStart = this.#clock.now();
          inWindow = 0;
          // Touched by a client while this sweep waited: already resumed, not the sweeper's.
          if (sessions.find(agent, session) !== undefined) continue;
        }
        inWindow++;
        counts?.sweeping(agent, session);
        try {
          // Creating the session resumes what its journal holds.
          await sessions.use(agent, session, () => undefined);
        } finally {
          counts?.swept(agent, session);
        }
        activated++;
      } catch (error) {
        // Taken by another host in the meantime, or the host is closing: the next sweep sees.
        if (ownership === undefined)
          log(`cannot resume session ${agent}/${session}: ${describeError(error)}`);
      }
    }
    if (activated > 0) {
      const total = counts?.snapshot();
      log(
        `resumed ${activated} session${activated === 1 ? "" : "s"} from their journals (at most ${this.#rate}/s)${total === undefined ? "" : `; so far resumed on first touch ${total.onFirstTouch}, by the sweeper ${total.bySweeper}`}`,
      );
    }
    return activated;
  }

  /** Stops sweeping (the host is closing). */
  close(): void {
    this.#isClosed = true;
    this.#closing.abort();
    if (this.#timer !== undefined) clearInterval(this.#timer);
  }
}
