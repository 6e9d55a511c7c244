import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** How long a host goes without a request before it collects (the CLI's default). */
export const DEFAULT_QUIET_COLLECTION_MS = 10_000;
/** The committed heap must have grown this much since the last collection for one to be worth it. */
export const DEFAULT_QUIET_COLLECTION_GROWTH_BYTES = 16 * 1024 * 1024;
/**
 * On Node 20 a full collection compacts only part of a fragmented old space; each further one, a
 * while later, compacts more (a 5 %-live old space shrank by 14–23 % at each of four in a row). At
 * most this many per quiet stretch, each only while the host stays quiet and the last one gave back
 * a noticeable share; on Node 22 and later the first one gives back nearly all and the second ends it.
 */
export const DEFAULT_QUIET_COLLECTION_ROUNDS = 8;
/** Between two rounds of one quiet stretch. */
export const DEFAULT_QUIET_COLLECTION_ROUND_GAP_MS = 1_000;
/** A round that gives back less than this share of the committed heap is a small one. */
const MIN_ROUND_GAIN = 0.05;
/**
 * Small rounds in a row that end a quiet stretch's collections. Not one: on Node 20 the first full
 * collection after a burst often gives back only a little (it finds the old space fragmented and
 * compacts a part of it) and the second one most of it — 260 → 227 → 150 → 122 → 102 → 88 MB in one
 * measured stretch; stopping at a first small round left a whole burst's memory with the host.
 */
const SMALL_ROUNDS_TO_STOP = 2;

/** The timers the collector arms (injected in tests). */
export interface QuietCollectorTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export interface QuietCollectorOptions {
  /** How long without a request in flight before the host collects (ms). */
  quietMs: number;
  /** How much the committed heap must have grown since the last collection (bytes; default 16 MiB). */
  minGrowthBytes?: number;
  /** Full collections per quiet stretch at most (default 8). */
  rounds?: number;
  /** Between two rounds (ms; default 1 s). */
  roundGapMs?: number;
  /**
   * Whether the process has work besides requests (a chat resumed after a restart, a session
   * starting): checked before each collection; a busy host tries again `quietMs` later.
   */
  isBusy?: () => boolean;
  /** Runs one full garbage collection (default: V8's `gc`, exposed on first use). */
  collect?: () => void;
  /** The bytes of heap V8 holds from the system (default: `total_physical_size`). */
  heapCommitted?: () => number;
  timers?: QuietCollectorTimers;
  log?: (line: string) => void;
}

const realTimers: QuietCollectorTimers = {
  setTimeout: (callback, ms) => {
    const handle = setTimeout(callback, ms);
    // An idle host with nothing else to do is free to exit.
    handle.unref();
    return handle;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

const committedHeap = (): number => getHeapStatistics().total_physical_size;

let exposedGc: (() => void) | null | undefined;

/**
 * V8 12 and later (Node 22 on) take `gc({ flavor: "last-resort" })`: the collection V8 runs before
 * giving up on memory, which compacts the old space and hands its pooled free pages back to the
 * system at once (a plain `gc()` there shrinks the heap but keeps the pages in V8's pool). V8 11
 * (Node 20) ignores the options object and collects nothing for it, so it gets a plain `gc()`,
 * which there returns the pages it frees.
 */
const takesGcOptions = Number(process.versions.v8.split(".")[0]) >= 12;

function asCollection(gc: (options?: object) => unknown): () => void {
  return takesGcOptions
    ? () => void gc({ type: "major", execution: "sync", flavor: "last-resort" })
    : () => void gc();
}

/**
 * V8's full collection, as `node --expose-gc` exposes it: the global `gc` when the process was
 * started with that flag, else the flag turned on now and `gc` taken from a fresh context (the
 * flag adds `gc` to contexts created after it is set). Undefined when neither works.
 */
export function fullCollection(): (() => void) | undefined {
  if (exposedGc !== undefined) return exposedGc ?? undefined;
  const global = (globalThis as { gc?: unknown }).gc;
  if (typeof global === "function") {
    exposedGc = asCollection(global as (options?: object) => unknown);
    return exposedGc;
  }
  try {
    setFlagsFromString("--expose-gc");
    const fromContext: unknown = runInNewContext("gc");
    exposedGc =
      typeof fromContext === "function" ? asCollection(fromContext as (options?: object) => unknown) : null;
  } catch {
    exposedGc = null;
  }
  return exposedGc ?? undefined;
}

/**
 * Gives a quiet host's memory back after a burst of work. V8 keeps the old-space pages a burst
 * filled with short-lived objects until a full collection compacts them, and returns freed pages to
 * the system only after one; a process that goes quiet right after a burst may run none for as long
 * as it stays quiet, and holds several times what its live sessions need.
 *
 * So once no request has been in flight for `quietMs`, and the committed heap grew by at least
 * `minGrowthBytes` since the last collection, the collector runs a full collection, then up to
 * `rounds - 1` more `roundGapMs` apart until two in a row give back little. It runs at
 * most once per quiet stretch (the next one starts when a request ends), never while a request is
 * in flight, and stops between rounds as soon as one arrives.
 */
export class QuietCollector {
  readonly #quietMs: number;
  readonly #minGrowthBytes: number;
  readonly #rounds: number;
  readonly #roundGapMs: number;
  readonly #collect: (() => void) | undefined;
  readonly #isBusy: () => boolean;
  readonly #heapCommitted: () => number;
  readonly #timers: QuietCollectorTimers;
  readonly #log: (line: string) => void;
  #running = 0;
  #timer: unknown;
  /** The committed heap after the last collection (or when the collector started). */
  #baseline: number;
  #closed = false;

  constructor(options: QuietCollectorOptions) {
    if (!(options.quietMs > 0))
      throw new RangeError(`quietMs must be a positive number, got ${options.quietMs}`);
    this.#quietMs = options.quietMs;
    this.#minGrowthBytes = options.minGrowthBytes ?? DEFAULT_QUIET_COLLECTION_GROWTH_BYTES;
    this.#rounds = Math.max(1, Math.floor(options.rounds ?? DEFAULT_QUIET_COLLECTION_ROUNDS));
    this.#roundGapMs = options.roundGapMs ?? DEFAULT_QUIET_COLLECTION_ROUND_GAP_MS;
    this.#collect = options.collect ?? fullCollection();
    this.#isBusy = options.isBusy ?? (() => false);
    this.#heapCommitted = options.heapCommitted ?? committedHeap;
    this.#timers = options.timers ?? realTimers;
    this.#log = options.log ?? (() => {});
    this.#baseline = this.#heapCommitted();
    if (this.#collect === undefined) {
      this.#log("quiet collection is off: this Node exposes no full garbage collection");
    }
  }

  /** A request started: the host is busy (a pending collection is called off). */
  begin(): void {
    this.#running++;
    this.#disarm();
  }

  /** A request ended: when it was the last in flight, a quiet stretch starts. */
  end(): void {
    if (this.#running > 0) this.#running--;
    if (this.#running === 0) this.#arm(this.#quietMs, 1);
  }

  /** Stops the collector (the host is closing): nothing more is collected. */
  close(): void {
    this.#closed = true;
    this.#disarm();
  }

  #arm(ms: number, round: number, smallRounds = 0): void {
    this.#disarm();
    if (this.#closed || this.#collect === undefined) return;
    this.#timer = this.#timers.setTimeout(() => {
      this.#timer = undefined;
      this.#run(round, smallRounds);
    }, ms);
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #run(round: number, smallRounds = 0): void {
    const collect = this.#collect;
    if (this.#closed || this.#running > 0 || collect === undefined) return;
    if (this.#isBusy()) {
      // Work without a request in flight (a resumed chat): not quiet yet, look again later.
      this.#arm(this.#quietMs, round, smallRounds);
      return;
    }
    const before = this.#heapCommitted();
    if (round === 1 && before - this.#baseline < this.#minGrowthBytes) {
      // Little grew since the last collection: nothing worth a full collection's pause. A host that
      // shrank (V8 collected by itself) starts counting from there.
      this.#baseline = Math.min(this.#baseline, before);
      return;
    }
    try {
      collect();
    } catch (error) {
      this.#log(`quiet collection failed: ${String(error)}`);
      return;
    }
    const after = this.#heapCommitted();
    this.#baseline = after;
    const small = before - after < before * MIN_ROUND_GAIN ? smallRounds + 1 : 0;
    if (round < this.#rounds && small < SMALL_ROUNDS_TO_STOP) {
      this.#arm(this.#roundGapMs, round + 1, small);
    }
  }
}
