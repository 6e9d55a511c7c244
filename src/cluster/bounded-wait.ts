/**
 * How long one NATS step of a shutdown (a release, a goodbye, a close) may take. With the server
 * gone such a step would wait for the reconnect, which may never come; the lease lapses anyway.
 */
export const SHUTDOWN_WAIT_MS = 1_500;

/**
 * How long a connected host stopping gracefully waits for the releases of its shards, written all
 * at once (a few hundred compare-and-sets). Longer than one step: a shard not released lapses only
 * with this host's lease, so the next owner waits a whole TTL for it, and a busy server answers
 * hundreds of writes more slowly than one.
 */
export const SHUTDOWN_RELEASE_WAIT_MS = 10_000;

/**
 * Waits for `work` at most `ms`: resolves true when it settled in time (fulfilled or rejected),
 * false when the time ran out (the work goes on unobserved; its rejection is swallowed).
 */
export function settlesWithin(work: Promise<unknown>, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), Math.max(0, ms));
    timer.unref?.();
    work.then(
      () => {
        clearTimeout(timer);
        resolve(true);
      },
      () => {
        clearTimeout(timer);
        resolve(true);
      },
    );
  });
}
