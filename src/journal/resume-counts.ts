/** How many sessions had unfinished work resumed, and what woke them. */
export interface ResumeCountsSnapshot {
  /** Woken by a request to the session (a chat, a retry, a control): resumed on first touch. */
  onFirstTouch: number;
  /** Woken by the journal sweeper, which goes through orphaned journals at a bounded rate. */
  bySweeper: number;
}

/**
 * Counts the sessions a host resumed from their journals, split by what woke them. After a
 * failover these two numbers show whether the work of the dead host came back through its
 * clients' retries or through the sweeper, and so whether the sweeper's rate bound matters.
 *
 * The sweeper marks a session before it activates it; the session factory calls
 * {@link ResumeCounts.record} when a new session's journal held work, and the mark decides the side.
 */
export class ResumeCounts {
  readonly #bySweeperNow = new Set<string>();
  #onFirstTouch = 0;
  #bySweeper = 0;

  /** The sweeper is about to activate this session: a resume recorded meanwhile is the sweeper's. */
  sweeping(agent: string, session: string): void {
    this.#bySweeperNow.add(keyOf(agent, session));
  }

  /** The sweeper is done activating this session (whether or not it resumed anything). */
  swept(agent: string, session: string): void {
    this.#bySweeperNow.delete(keyOf(agent, session));
  }

  /** A session just started with unfinished work from its journal. */
  record(agent: string, session: string): void {
    if (this.#bySweeperNow.has(keyOf(agent, session))) this.#bySweeper++;
    else this.#onFirstTouch++;
  }

  snapshot(): ResumeCountsSnapshot {
    return { onFirstTouch: this.#onFirstTouch, bySweeper: this.#bySweeper };
  }
}

function keyOf(agent: string, session: string): string {
  return `${agent}\u0000${session}`;
}
