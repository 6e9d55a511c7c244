import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { listKvKeys } from "../../src/cluster/kv-keys.js";
import { LeaseRecord } from "../../src/cluster/session-lease.js";
import { shardsBucketName } from "../../src/cluster/shard-keeper.js";
import { entryJson, WatchedBucket } from "../../src/cluster/watched-bucket.js";

/** A shard lease's key: `shard.<n>`, or `shard_<group>.<n>` for hosts that name their agents. */
const SHARD_KEY = /^shard(?:_[0-9a-f]+)?\.(\d+)$/;

/**
 * The shard map as the hosts see it: the `<PREFIX>_SHARDS` bucket followed by a KV watch, read
 * locally. A shard belongs to the host its record names unless the record says it was released.
 */
export class ShardWatch {
  readonly #table = new WatchedBucket<LeaseRecord>((entry) => {
    const parsed = LeaseRecord.safeParse(entryJson(entry));
    return parsed.success ? parsed.data : undefined;
  });

  static async open(connection: NatsConnection, prefix: string): Promise<ShardWatch> {
    const name = shardsBucketName(prefix);
    const kv = await new Kvm(connection).open(name);
    const watch = new ShardWatch();
    await watch.#table.start(kv, await listKvKeys(connection, name));
    return watch;
  }

  /** Each shard's owner now (`undefined`: nobody holds it). */
  owners(shardCount: number): (string | undefined)[] {
    const owners: (string | undefined)[] = Array.from({ length: shardCount });
    for (const [key, { value }] of this.#table.entries()) {
      const match = SHARD_KEY.exec(key);
      if (match === null || value.released === true) continue;
      const shard = Number(match[1]);
      if (shard < shardCount) owners[shard] = value.host;
    }
    return owners;
  }

  /** How many shards each host holds now. */
  counts(shardCount: number): Map<string, number> {
    const counts = new Map<string, number>();
    for (const owner of this.owners(shardCount)) {
      if (owner !== undefined) counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    return counts;
  }

  close(): void {
    this.#table.close();
  }
}
