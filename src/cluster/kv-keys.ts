import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";

/**
 * The keys of KV bucket `bucket` that hold a message now (a deleted or purged key's marker
 * included: read the key to tell), sorted. Asked of the stream at one moment, unlike nats.js's
 * `kv.keys()`: that one follows the bucket until it has caught up, so while keys are being
 * rewritten (leases renewed, journals saved) it repeats some and misses others.
 */
export async function listKvKeys(connection: NatsConnection, bucket: string): Promise<string[]> {
  const jsm = await jetstreamManager(connection);
  const head = `$KV.${bucket}.`;
  const info = await jsm.streams.info(`KV_${bucket}`, { subjects_filter: `${head}>` });
  return Object.keys(info.state.subjects ?? {})
    .filter((subject) => subject.startsWith(head))
    .map((subject) => subject.slice(head.length))
    .sort();
}
