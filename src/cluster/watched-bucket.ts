import type { KV, KvEntry } from "@nats-io/kv";

/**
 * A local copy of a small KV bucket, kept current by a watch: reads cost no round trip. The watch
 * starts with every key's last value and then follows each write; a value `parse` refuses (written
 * by something else) counts as no value. `onChange` runs after each key's copy changed.
 */
export class WatchedBucket<T> {
  /** Deleted keys stay as tombstones (value undefined), so a late, older write is not taken back in. */
  readonly #values = new Map<string, { value: T | undefined; revision: number }>();
  readonly #parse: (entry: KvEntry) => T | undefined;
  readonly #onChange: (key: string) => void;
  #stop: (() => void) | undefined;
  #isClosed = false;

  constructor(parse: (entry: KvEntry) => T | undefined, onChange: (key: string) => void = () => {}) {
    this.#parse = parse;
    this.#onChange = onChange;
  }

  /** Starts the watch; resolves once the values stored when it started have been read. */
  async start(kv: KV, initialKeys: readonly string[]): Promise<void> {
    // The keys stored now are read first, so a caller sees the bucket as it was when start resolved.
    await Promise.all(
      initialKeys.map(async (key) => {
        const entry = await kv.get(key);
        if (entry !== null) this.#apply(entry);
      }),
    );
    const watch = await kv.watch({ key: ">" });
    this.#stop = () => watch.stop();
    if (this.#isClosed) watch.stop();
    void (async () => {
      for await (const entry of watch) this.#apply(entry);
    })().catch(() => {
      // The watch ends when the connection closes; the copy then stays as it was.
    });
  }

  /** The value of `key` with its revision, as last seen. */
  get(key: string): { value: T; revision: number } | undefined {
    const known = this.#values.get(key);
    return known?.value === undefined ? undefined : { value: known.value, revision: known.revision };
  }

  /** The value of `key` as last seen, without its revision (nothing is allocated: asked often). */
  valueOf(key: string): T | undefined {
    return this.#values.get(key)?.value;
  }

  /** Every key with a value. */
  *entries(): Generator<[string, { value: T; revision: number }]> {
    for (const [key, known] of this.#values) {
      if (known.value !== undefined) yield [key, { value: known.value, revision: known.revision }];
    }
  }

  /** A value written here (its own write's answer) is applied at once, not when the watch brings it. */
  note(key: string, value: T | undefined, revision: number): void {
    const known = this.#values.get(key);
    if (known !== undefined && known.revision >= revision) return;
    this.#values.set(key, { value, revision });
    this.#onChange(key);
  }

  close(): void {
    this.#isClosed = true;
    this.#stop?.();
  }

  #apply(entry: KvEntry): void {
    const known = this.#values.get(entry.key);
    if (known !== undefined && known.revision >= entry.revision) return;
    const value = entry.operation === "PUT" ? this.#parse(entry) : undefined;
    this.#values.set(entry.key, { value, revision: entry.revision });
    this.#onChange(entry.key);
  }
}

/** The entry's JSON, or undefined when it is not JSON. */
export function entryJson(entry: KvEntry): unknown {
  try {
    return entry.json();
  } catch {
    return undefined;
  }
}
