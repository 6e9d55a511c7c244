import { ConfigurationError } from "../errors/configuration-error.js";

/**
 * At most `cap` tool calls of one session run at once; the others wait their turn, first come
 * first served. A call under the cap starts at once, in the caller's turn (no promise, queue entry
 * or microtask hop of its own); a finished call hands its place straight to the next one waiting,
 * so a call that arrives meanwhile cannot take it first.
 */
export class ToolCallLimit {
  readonly #cap: number;
  #running = 0;
  /** Each waiting call's start, in arrival order. */
  readonly #waiting: Array<() => void> = [];

  constructor(cap: number) {
    // Infinity: no cap at all, every call of a turn runs at once.
    if (!(Number.isInteger(cap) || cap === Number.POSITIVE_INFINITY) || cap < 1) {
      throw new ConfigurationError(
        `maxConcurrentToolCalls must be a positive integer or Infinity, got ${cap}`,
      );
    }
    this.#cap = cap;
  }

  /** How many calls run now. */
  get running(): number {
    return this.#running;
  }

  /** How many calls wait for a place. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Runs `task` once a place is free; settles as it does. */
  run<T>(task: () => Promise<T>): Promise<T> {
    if (this.#running < this.#cap) {
      this.#running += 1;
      return this.#runInPlace(task);
    }
    return new Promise<void>((start) => this.#waiting.push(start)).then(() => this.#runInPlace(task));
  }

  /** Runs a task that holds a place, then passes the place on (or frees it). */
  async #runInPlace<T>(task: () => Promise<T>): Promise<T> {
    try {
      return await task();
    } finally {
      const next = this.#waiting.shift();
      if (next === undefined) this.#running -= 1;
      else next();
    }
  }
}
