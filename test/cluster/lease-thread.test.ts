import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { BroadcastChannel } from "node:worker_threads";
import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { SharedLeaseState } from "../../src/cluster/host-lease-state.js";
import { SessionCluster } from "../../src/cluster/session-cluster.js";
import { LeaseRecord, leaseTiming } from "../../src/cluster/session-lease.js";
import { shardsBucketName } from "../../src/cluster/shard-keeper.js";
import type { AgentEvent } from "../../src/events/types.js";
import { type FakeOpenAI, startFakeOpenAI, turn } from "../../src/testing/index.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, waitUntilServing } from "../host/running-serve.js";
import { startBinary, waitFor } from "../support/cli.js";
import { assertFreshBuild } from "../support/fresh-build.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { startRelay } from "../support/stalling-relay.js";

/**
 * This host's own lease is renewed on a worker thread with a NATS connection of its own: a main
 * event loop that stalls for seconds (a flood of chats, a tool that computes) no longer lets it
 * lapse and drop every shard. A thread that dies renews nothing more, and the host gives its shards
 * up at the deadline of the last renewal it confirmed.
 */

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
/** The lease thread as built, ended on a word from the test (see the fixture). */
const DYING_WORKER = new URL("../fixtures/dying-lease-worker.mjs", import.meta.url);
/** The lease thread as built. */
const LEASE_WORKER = new URL("../../dist/src/cluster/host-lease-worker.js", import.meta.url);

let server: NatsServer;
let bus: NatsBus;
let cleanups: (() => Promise<unknown>)[] = [];

beforeAll(async () => {
  assertFreshBuild();
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "lease-thread-test" });
});

afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  cleanups = [];
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

async function connectTo(url: string): Promise<NatsConnection> {
  const connection = await connect({ servers: url, maxReconnectAttempts: -1 });
  cleanups.push(() => connection.close());
  return connection;
}

/** Every version of `host.<hostId>` stored from now on, as the watch delivers them. */
async function watchHostLease(prefix: string, hostId: string): Promise<LeaseRecord[]> {
  const kv = await new Kvm(bus.connection).open(shardsBucketName(prefix));
  const records: LeaseRecord[] = [];
  const watch = await kv.watch({ key: `host.${hostId}` });
  cleanups.push(async () => watch.stop());
  void (async () => {
    for await (const entry of watch) {
      if (entry.operation !== "PUT") continue;
      const parsed = LeaseRecord.safeParse(entry.json());
      if (parsed.success) records.push(parsed.data);
    }
  })();
  return records;
}

async function readHostLease(prefix: string, hostId: string): Promise<LeaseRecord> {
  const kv = await new Kvm(bus.connection).open(shardsBucketName(prefix));
  const entry = await kv.get(`host.${hostId}`);
  if (entry === null) throw new Error(`no lease of host ${hostId}`);
  return LeaseRecord.parse(entry.json());
}

describe("the shared state of the host lease", () => {
  it("is held only at its own epoch, before its deadline, and never again once lost", () => {
    const state = new SharedLeaseState();
    expect(state.notHeld(1, 0)).toBe("replaced");
    state.write(1, 5_000, 7);
    expect(state.notHeld(1, 4_999)).toBeUndefined();
    expect(state.notHeld(1, 5_000)).toBe("expired");
    expect(state.revision).toBe(7);
    // Read through a second view of the same memory, as the other thread does.
    const other = new SharedLeaseState(state.buffer);
    state.write(2, 9_000, 8);
    expect(other.notHeld(1, 10)).toBe("replaced");
    expect(other.notHeld(2, 10)).toBeUndefined();
    state.markLost(2);
    expect(other.notHeld(2, 10)).toBe("lost");
    // A deadline written later for the lost epoch does not bring it back.
    state.write(2, 20_000, 9);
    expect(other.notHeld(2, 10)).toBe("lost");
    expect(() => new SharedLeaseState(new SharedArrayBuffer(8))).toThrow(/needs 32 bytes, got 8/);
  });
});

describe("a real host whose main event loop stalls for two TTLs", () => {
  let directory: string;
  let fake: FakeOpenAI | undefined;

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), "agentloop-lease-thread-"));
    // The config file imports agentloop as an installed package: here, this repository.
    await mkdir(join(directory, "node_modules"));
    await symlink(ROOT, join(directory, "node_modules/agentloop"), "dir");
  });

  afterAll(async () => {
    await fake?.close();
    await rm(directory, { recursive: true, force: true });
  });

  it(
    "keeps its lease renewed meanwhile (by its lease thread), answers afterwards and releases the lease when stopped",
    { timeout: 120_000 },
    async () => {
      fake = await startFakeOpenAI({
        chat: [
          turn({ toolCalls: [{ id: "call_1", name: "stall", arguments: "{}" }] }),
          turn({ text: "done" }),
          turn({ text: "still here" }),
        ],
      });
      // A tool that busy-waits 4 s on the main thread: twice the lease TTL below.
      const configPath = join(directory, "agentloop.config.js");
      await writeFile(
        configPath,
        `import { defineConfig, defineTool, z } from "agentloop";

const stall = defineTool({
  name: "stall",
  description: "Keeps the event loop busy.",
  parameters: z.object({}),
  execute: () => {
    const start = Date.now();
    while (Date.now() < start + 4000) {}
    return { start, end: Date.now() };
  },
});

export default defineConfig({
  agents: [
    { name: "support", provider: "openai-chat", model: "gpt-fake", baseUrl: ${JSON.stringify(fake.baseUrl)}, tools: [stall] },
  ],
});
`,
      );
      const prefix = uniqueRoot();
      const { child, result } = startBinary(
        [
          "serve",
          ...["--nats", server.url, "--prefix", prefix, "--config", configPath],
          ...["--history", "nats", "--lease-ttl", "2s", "--host-id", "h1"],
        ],
        { env: { OPENAI_API_KEY: "test" }, timeoutMs: 110_000 },
      );
      const serve: RunningServe = {
        run: result,
        stop: () => {
          child.kill("SIGINT");
          return result;
        },
      };
      cleanups.push(async () => child.kill("SIGKILL"));
      await waitUntilServing(bus, prefix, serve, "support", 60_000);
      const before = await readHostLease(prefix, "h1");
      const renewals = await watchHostLease(prefix, "h1");
      const completed = record(bus, `${prefix}.events.support.s1.ToolCallCompleted`);
      await bus.flush();

      const reply = await bus.request(
        chatSubject(prefix, "support"),
        JSON.stringify({ session: "s1", text: "go" }),
        {
          timeoutMs: 60_000,
        },
      );
      // The history was written after the stall: the session's fence still held.
      expect(JSON.parse(reply.data)).toMatchObject({ ok: true, session: "s1", result: "done" });
      const [event] = await completed.waitFor(1);
      completed.unsubscribe();
      const toolEvent = JSON.parse(event!.data) as Extract<AgentEvent, { kind: "ToolCallCompleted" }>;
      const stalled = JSON.parse(toolEvent.result) as { start: number; end: number };
      expect(stalled.end - stalled.start).toBeGreaterThanOrEqual(4_000);

      // Renewals were stored while the main loop was busy (stamped by the thread that sent them),
      // every one under the epoch the host started with.
      const duringStall = renewals.filter(
        (lease) => lease.renewedAt > stalled.start && lease.renewedAt < stalled.end,
      );
      expect(duringStall.length).toBeGreaterThanOrEqual(2);
      expect(new Set(renewals.map((lease) => lease.epoch))).toEqual(new Set([before.epoch]));

      const next = await bus.request(
        chatSubject(prefix, "support"),
        JSON.stringify({ session: "s2", text: "hi" }),
        {
          timeoutMs: 30_000,
        },
      );
      expect(JSON.parse(next.data), next.data).toMatchObject({ ok: true, result: "still here" });

      const run = await serve.stop();
      expect(run.code).toBe(0);
      expect(run.stderr).not.toContain("lease was lost");
      // Released on the way out (by the lease thread, a compare-and-set), not left to lapse.
      const after = await readHostLease(prefix, "h1");
      expect(after).toMatchObject({ host: "h1", epoch: before.epoch, released: true });
    },
  );
});

describe("a host whose lease thread dies", () => {
  it(
    "gives up every shard at the deadline of the last renewal, then takes its lease again under a new thread",
    { timeout: 60_000 },
    async () => {
      const SHARDS = 8;
      const prefix = uniqueRoot();
      const lost: string[] = [];
      const lines: string[] = [];
      const cluster = await SessionCluster.start({
        connection: await connectTo(server.url),
        prefix,
        hostId: "h1",
        timing: leaseTiming(1_500),
        shardCount: SHARDS,
        agents: ["assistant"],
        leaseThread: { connect: { url: server.url }, workerUrl: DYING_WORKER },
        log: (line) => lines.push(line),
      });
      cleanups.push(() => cluster.close());
      cluster.onShardLost((shard, reason) => lost.push(`${shard}: ${reason}`));
      await waitFor(() => cluster.shards.heldCount === SHARDS, 20_000);
      const fence = cluster.shards.fenceOf(0);
      expect(fence).toBeDefined();
      const before = await readHostLease(prefix, "h1");

      const channel = new BroadcastChannel("agentloop-test-end-lease-thread");
      channel.postMessage("end");
      channel.close();

      await waitFor(() => lost.length === SHARDS, 20_000);
      // Told by the deadline's timer (nothing renewed it since the thread ended), not by the thread.
      expect(lost[0]).toMatch(
        /this host's lease was lost: its lease was not renewed in time: the host lease thread stopped \(it exited with code 1\)/,
      );
      expect(lines.join("\n")).toContain("the host lease thread stopped (it exited with code 1)");
      expect(() => fence!.assertHeld()).toThrow(/no longer owns shard 0/);

      // The balancer takes the lease again (a new epoch, a new thread) and the shards with it.
      await waitFor(() => cluster.shards.heldCount === SHARDS, 20_000);
      const after = await readHostLease(prefix, "h1");
      expect(after.epoch).toBeGreaterThan(before.epoch);
    },
  );
});

describe("a host whose lease thread's connection stalls", () => {
  it(
    "loses every shard when its renewals stop getting through, says so with the thread's own account, and takes them again once they do",
    { timeout: 60_000 },
    async () => {
      const SHARDS = 8;
      const relay = await startRelay(server.url);
      cleanups.push(() => relay.close());
      const prefix = uniqueRoot();
      const lost: string[] = [];
      const cluster = await SessionCluster.start({
        connection: await connectTo(server.url),
        prefix,
        hostId: "h1",
        timing: leaseTiming(1_500),
        shardCount: SHARDS,
        agents: ["assistant"],
        leaseThread: { connect: { url: relay.url }, workerUrl: LEASE_WORKER },
      });
      cleanups.push(() => cluster.close());
      cluster.onShardLost((shard, reason) => lost.push(`${shard}: ${reason}`));
      await waitFor(() => cluster.shards.heldCount === SHARDS, 20_000);
      const fence = cluster.shards.fenceOf(0);
      const before = await readHostLease(prefix, "h1");

      // Only the thread's connection goes through the relay: the host's own stays up.
      relay.stall();
      await waitFor(() => lost.length === SHARDS, 20_000);
      relay.resume();
      // Told by the thread, which timed the renewals and watched its own event loop (on a machine
      // so loaded that its word came after the main thread's wait, without that account).
      expect(lost[0]).toMatch(
        /this host's lease was lost: its lease was not renewed in time( \(last renewed \d+\.\d s ago; since then \d+ renewals? failed, the slowest answer \d+ ms; lease thread event loop delay max \d+ ms, p99 \d+ ms; CPU used \d+ ms\))?$/,
      );
      expect(() => fence!.assertHeld()).toThrow(/no longer owns shard 0/);

      // The same thread, its connection back, takes a new lease and the shards with it.
      await waitFor(() => cluster.shards.heldCount === SHARDS, 20_000);
      expect((await readHostLease(prefix, "h1")).epoch).toBeGreaterThan(before.epoch);
    },
  );
});
