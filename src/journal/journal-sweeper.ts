import { describeError } from "../errors/describe-error.js";
import type { ChatJournal } from "./chat-journal.js";

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
  log?: (line: string) => void;
}

/**
 * Resume after a crash: finds the sessions whose host stopped with work unfinished — a journal entry and no
 * live owner — and activates them here. Activating a session resumes its journal (see
 * `SessionActor.resumeUnfinished`, called by the host for every session it creates), so the
 * unfinished chat and the queued ones run without waiting for a new message.
 *
 * At start it sweeps once; with several hosts it sweeps again every `intervalMs`, which is how a
 * dead host's sessions move to a live one within the lease TTL plus one interval.
 */
export class JournalSweeper {
  readonly #options: JournalSweeperOptions;
  readonly #served: ReadonlySet<string>;
  #timer: NodeJS.Timeout | undefined;
  #sweeping: Promise<number> | undefined;
  #isClosed = false;

  constructor(options: JournalSweeperOptions) {
    this.#options = options;
    this.#served = new Set(options.agents);
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
    let activated = 0;
    for (const { agent, session } of entries) {
      if (this.#isClosed) break;
      if (!this.#served.has(agent) || sessions.find(agent, session) !== undefined) continue;
      try {
        if (ownership !== undefined && (await ownership.ownerElsewhere(agent, session)) !== undefined)
          continue;
        // Creating the session resumes what its journal holds.
        await sessions.use(agent, session, () => undefined);
        activated++;
      } catch (error) {
        // Taken by another host in the meantime, or the host is closing: the next sweep sees.
        if (ownership === undefined)
          log(`cannot resume session ${agent}/${session}: ${describeError(error)}`);
      }
    }
    return activated;
  }

  /** Stops sweeping (the host is closing). */
  close(): void {
    this.#isClosed = true;
    if (this.#timer !== undefined) clearInterval(this.#timer);
  }
}
