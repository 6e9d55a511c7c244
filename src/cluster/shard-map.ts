/**
 * The pure half of session sharding: which shard a session belongs to, and which live member a
 * shard should live on. No I/O: every host computes the same answers from the same inputs, so the
 * hosts agree on the assignment without a coordinator.
 */

/** Default shard count (`--shards`); must be equal on every host of a system. */
export const DEFAULT_SHARD_COUNT = 1024;

/** The bounds `--shards` accepts. */
export const MIN_SHARDS = 1;
export const MAX_SHARDS = 65_536;

/**
 * 32-bit FNV-1a of a string's UTF-16 code units, then an avalanche (murmur3's finaliser) so that
 * keys differing in their last characters spread over every bit. Stable across processes, Node
 * versions and platforms: it is part of what hosts must agree on.
 */
export function stableHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < text.length; index++) {
    hash ^= text.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193);
  }
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}

/**
 * The shard of session `session` of agent `agent`, in `[0, shardCount)`. Sessions are keyed by
 * agent and session; tenants run under their own prefix (their own buckets), so the key needs no
 * tenant.
 *
 * @example
 * shardOf("assistant", "s42", 1024); // the same number on every host, every run
 */
export function shardOf(agent: string, session: string, shardCount: number): number {
  return stableHash(`${agent}/${session}`) % shardCount;
}

/**
 * The member a shard should live on: highest random weight (rendezvous) hashing of the shard
 * against every member id. Each shard goes to one member, shards spread evenly, and when a member
 * joins or leaves only the shards it gains or loses move. Undefined when there are no members.
 */
export function preferredOwner(shard: number, members: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestWeight = -1;
  for (const member of members) {
    const weight = stableHash(`${shard}@${member}`);
    // Ties (vanishingly rare) go to the smaller id, so every host breaks them alike.
    if (weight > bestWeight || (weight === bestWeight && best !== undefined && member < best)) {
      best = member;
      bestWeight = weight;
    }
  }
  return best;
}

/** The whole map: for each shard `0 … shardCount − 1`, its preferred member. */
export function assignShards(shardCount: number, members: readonly string[]): (string | undefined)[] {
  const sorted = [...new Set(members)].sort();
  return Array.from({ length: shardCount }, (_, shard) => preferredOwner(shard, sorted));
}

/** `--shards N`: a whole number within bounds, or a one-line reason. */
export function checkShardCount(count: number): string | undefined {
  if (!Number.isInteger(count) || count < MIN_SHARDS || count > MAX_SHARDS) {
    return `the shard count must be a whole number from ${MIN_SHARDS} to ${MAX_SHARDS}, got ${count}`;
  }
  return undefined;
}
