import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { membersBucketName } from "../../src/cluster/membership.js";
import { SessionCluster } from "../../src/cluster/session-cluster.js";
import { LeaseRecord, leaseTiming } from "../../src/cluster/session-lease.js";
import { shardsBucketName } from "../../src/cluster/shard-keeper.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { startRelay } from "../support/stalling-relay.js";

/**
 * Lease upkeep: a host's lease, its shard leases and its heartbeat go on a connection of their own,
 * so a data connection that stalls (bulk journal and history traffic, a full socket) cannot make the
 * host miss its renewals and stop every session it holds. And a host whose lease ran out loses its
 * shards to a live host at once, whatever its heartbeat record still says.
 */

const TTL_MS = 1_500;
const SHARDS = 8;

let server: NatsServer;
let cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
});

afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  cleanups = [];
});

afterAll(async () => {
  await server.stop();
});

async function connectTo(url: string): Promise<NatsConnection> {
  const connection = await connect({ servers: url, maxReconnectAttempts: -1 });
  cleanups.push(() => connection.close());
  return connection;
}

async function startHost(
  prefix: string,
  hostId: string,
  connections: { connection: NatsConnection; leaseConnection?: NatsConnection },
  lost: string[],
): Promise<SessionCluster> {
  const cluster = await SessionCluster.start({
    ...connections,
    prefix,
    hostId,
    timing: leaseTiming(TTL_MS),
    shardCount: SHARDS,
    agents: ["assistant"],
  });
  cluster.onShardLost((shard, reason) => lost.push(`${shard}: ${reason}`));
  cleanups.push(() => cluster.close());
  return cluster;
}

/** Reads `host.<hostId>` of the shard bucket: this host's lease as stored. */
async function hostLease(connection: NatsConnection, prefix: string, hostId: string): Promise<LeaseRecord> {
  const kv = await new Kvm(connection).open(shardsBucketName(prefix));
  const entry = await kv.get(`host.${hostId}`);
  if (entry === null) throw new Error(`no lease of host ${hostId}`);
  return LeaseRecord.parse(entry.json());
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("lease upkeep on a connection of its own", () => {
  it(
    "keeps the host's lease and shards while its data connection is stalled for three TTLs",
    { timeout: 60_000 },
    async () => {
      const relay = await startRelay(server.url);
      cleanups.push(() => relay.close());
      const prefix = uniqueRoot();
      const lost: string[] = [];
      const cluster = await startHost(
        prefix,
        "h1",
        { connection: await connectTo(relay.url), leaseConnection: await connectTo(server.url) },
        lost,
      );
      await waitFor(() => cluster.shards.heldCount === SHARDS, 60_000);
      const observer = await connectTo(server.url);
      const before = await hostLease(observer, prefix, "h1");

      relay.stall();
      await sleep(3 * TTL_MS);
      const during = await hostLease(observer, prefix, "h1");
      expect(cluster.shards.heldCount).toBe(SHARDS);
      relay.resume();

      expect(lost).toEqual([]);
      // Renewed the whole time, under the same epoch.
      expect(during.epoch).toBe(before.epoch);
      expect(during.expiresAt).toBeGreaterThan(before.expiresAt + 2 * TTL_MS);
    },
  );

  it(
    "loses them when the same stall hits the one connection that carries the leases too",
    { timeout: 60_000 },
    async () => {
      const relay = await startRelay(server.url);
      cleanups.push(() => relay.close());
      const prefix = uniqueRoot();
      const lost: string[] = [];
      const cluster = await startHost(prefix, "h1", { connection: await connectTo(relay.url) }, lost);
      await waitFor(() => cluster.shards.heldCount === SHARDS, 60_000);

      relay.stall();
      await sleep(3 * TTL_MS);
      const heldDuringStall = cluster.shards.heldCount;
      relay.resume();

      expect(heldDuringStall).toBe(0);
      expect(lost).toHaveLength(SHARDS);
      // The notice says why: no renewal answered since, and the event loop was not what held it.
      expect(lost[0]).toMatch(
        /this host's lease was lost: .*\(last renewed \d+\.\d s ago; since then \d+ renewals? failed, the slowest answer \d+ ms; event loop delay max \d+ ms, p99 \d+ ms; CPU used \d+ ms\)/,
      );
    },
  );
});

describe("a host whose lease ran out", () => {
  it(
    "loses its shards to the live host even while its heartbeat record still says it is live",
    { timeout: 60_000 },
    async () => {
      const prefix = uniqueRoot();
      const h1Connection = await connectTo(server.url);
      const h1 = await startHost(prefix, "h1", { connection: h1Connection }, []);
      await waitFor(() => h1.shards.heldCount === SHARDS, 60_000);
      const h2 = await startHost(prefix, "h2", { connection: await connectTo(server.url) }, []);
      // Balanced: each holds the shards that prefer it.
      await waitFor(() => h1.shards.heldCount > 0 && h2.shards.heldCount > 0, 60_000);
      await waitFor(() => h1.shards.heldCount + h2.shards.heldCount === SHARDS, 60_000);
      const ofH1 = Array.from({ length: SHARDS }, (_, shard) => shard).filter((shard) =>
        h1.shards.isServing(shard),
      );

      const observer = await connectTo(server.url);
      const diedWith = await hostLease(observer, prefix, "h1");
      // h1 dies without a word (its connection is cut: no renewal, no release), and a heartbeat
      // record that outlives it by an hour stays behind: only its lease says it is gone.
      await h1Connection.close();
      const members = await new Kvm(observer).open(membersBucketName(prefix));
      const stale = (await members.get("h1"))?.json<Record<string, unknown>>();
      await members.put("h1", JSON.stringify({ ...stale, expiresAt: Date.now() + 60 * 60_000 }));

      await waitFor(() => h2.shards.heldCount === SHARDS, 60_000);
      for (const shard of ofH1) expect(h2.shards.place(shard)).toEqual({ where: "here", shard });
      // Its lease was taken over once, not once per shard: one epoch above the one it died with.
      const lease = await hostLease(observer, prefix, "h1");
      expect(lease).toMatchObject({ host: "h2", released: true, epoch: diedWith.epoch + 1 });
    },
  );
});
