/** Timers the coalescer uses, injected so tests control time. */
export interface CoalescerTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: CoalescerTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

export interface StreamCoalescerOptions {
  /** Receives each coalesced piece of text (one `response` chunk). */
  send(text: string): void;
  /** Longest a piece waits for more text; default 50 ms. */
  intervalMs?: number;
  /** Largest piece in UTF-8 bytes; default 4 KB. A piece is sent as soon as it reaches this. */
  maxBytes?: number;
  timers?: CoalescerTimers;
}

/**
 * Joins text into pieces so a long answer is a few chunks, not thousands: a piece goes out when it
 * reaches `maxBytes` or `intervalMs` after its first text, whichever comes first. Splits only
 * between code points, so every piece is well-formed text.
 */
export class StreamCoalescer {
  readonly #send: (text: string) => void;
  readonly #intervalMs: number;
  readonly #maxBytes: number;
  readonly #timers: CoalescerTimers;
  #pending = "";
  #pendingBytes = 0;
  #timer: unknown;

  constructor(options: StreamCoalescerOptions) {
    this.#send = options.send;
    this.#intervalMs = options.intervalMs ?? 50;
    this.#maxBytes = Math.max(4, options.maxBytes ?? 4096);
    this.#timers = options.timers ?? realTimers;
  }

  push(text: string): void {
    for (const character of text) {
      const bytes = Buffer.byteLength(character, "utf8");
      if (this.#pendingBytes + bytes > this.#maxBytes) this.flush();
      this.#pending += character;
      this.#pendingBytes += bytes;
    }
    if (this.#pendingBytes >= this.#maxBytes) this.flush();
    else if (this.#pending !== "" && this.#timer === undefined) {
      this.#timer = this.#timers.setTimeout(() => {
        this.#timer = undefined;
        this.flush();
      }, this.#intervalMs);
    }
  }

  /** Sends what is pending now (the end of the stream, or a piece's time is up). */
  flush(): void {
    if (this.#timer !== undefined) {
      this.#timers.clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    if (this.#pending === "") return;
    const piece = this.#pending;
    this.#pending = "";
    this.#pendingBytes = 0;
    this.#send(piece);
  }
}
