import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { AgentSetOverlapError, ShardCountMismatchError } from "../../src/cluster/membership.js";
import { SessionCluster } from "../../src/cluster/session-cluster.js";
import { leaseTiming } from "../../src/cluster/session-lease.js";
import { AgentHost } from "../../src/host/agent-host.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { FakeAgent } from "../host/fake-agent.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Shards change hands while requests keep coming: a second host joins (the first hands over the
 * shards that now prefer the newcomer) and later leaves; every request is answered once and runs
 * once, on whichever host held its session's shard at the time.
 */

const SHARDS = 16;
let server: NatsServer;
let client: NatsBus;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
  client = await NatsBus.connect({ url: server.url, name: "shard-handoff-test" });
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  await client.close();
  await server.stop();
});

interface TestHost {
  host: AgentHost;
  cluster: SessionCluster;
  /** Every chat text each session ran on this host, across the session's lives here. */
  ran: Map<string, string[]>;
}

async function startHost(prefix: string, hostId: string, shardCount = SHARDS): Promise<TestHost> {
  const bus = await NatsBus.connect({ url: server.url, name: hostId });
  const cluster = await SessionCluster.start({
    connection: bus.connection,
    prefix,
    hostId,
    timing: leaseTiming(3_000),
    shardCount,
    agents: ["bot"],
  });
  const ran = new Map<string, string[]>();
  const host = new AgentHost({
    bus,
    prefix,
    agents: ["bot"],
    hostId,
    cluster,
    createAgent: async (name, session) => {
      const agent = new FakeAgent({ name, session });
      const texts = ran.get(session) ?? [];
      ran.set(session, texts);
      const chat = agent.chat.bind(agent);
      agent.chat = (text, options) => {
        texts.push(text);
        return chat(text, options);
      };
      return agent;
    },
  }).start();
  let isClosed = false;
  const close = async () => {
    if (isClosed) return;
    isClosed = true;
    await host.close({ graceMs: 5_000 });
    await bus.close();
  };
  cleanups.push(close);
  return { host, cluster, ran };
}

async function chat(prefix: string, session: string, text: string): Promise<unknown> {
  const payload = JSON.stringify({ session, text, id: `${session}-${text}` });
  // A request caught in a hand-off may be answered `unavailable` (retryable): a caller sends the same
  // id again, as the contract says, and the chat still runs once (asserted by the tests).
  for (let attempt = 1; ; attempt++) {
    const reply = await client.request(chatSubject(prefix, "bot"), payload, { timeoutMs: 30_000 });
    const parsed = JSON.parse(reply.data) as { ok: boolean; error?: { code?: string } };
    if (parsed.ok || parsed.error?.code !== "unavailable" || attempt === 3) return parsed;
  }
}

/** Sends `perSession` chats to each session, `concurrency` at a time, while `during` runs. */
async function traffic(prefix: string, sessions: string[], perSession: number, during: () => Promise<void>) {
  const work = sessions.flatMap((session) =>
    Array.from({ length: perSession }, (_, index) => ({ session, text: `m${index}` })),
  );
  const replies: unknown[] = [];
  const workers = Array.from({ length: 8 }, async () => {
    for (let next = work.shift(); next !== undefined; next = work.shift()) {
      replies.push(await chat(prefix, next.session, next.text));
    }
  });
  await Promise.all([...workers, during()]);
  return replies;
}

describe("shards handed over between hosts", () => {
  it("a host joining takes its share while requests run: none lost, none run twice", async () => {
    const prefix = uniqueRoot();
    const a = await startHost(prefix, "ha");
    await waitFor(() => a.cluster.shards.heldCount === SHARDS, 60_000);
    const sessions = Array.from({ length: 24 }, (_, index) => `s${index}`);
    let b: TestHost | undefined;
    const replies = await traffic(prefix, sessions, 6, async () => {
      await waitFor(() => a.ran.size >= 4, 60_000);
      b = await startHost(prefix, "hb");
    });
    expect(replies).toHaveLength(sessions.length * 6);
    expect(replies.filter((reply) => (reply as { ok: boolean }).ok !== true)).toEqual([]);
    await waitFor(() => a.cluster.shards.heldCount + (b?.cluster.shards.heldCount ?? 0) === SHARDS, 60_000);
    expect(b!.cluster.shards.heldCount).toBeGreaterThan(0);
    expect(a.cluster.shards.heldCount).toBeGreaterThan(0);
    // Each chat ran exactly once, on one host or the other.
    for (const session of sessions) {
      const ranOn = [...(a.ran.get(session) ?? []), ...(b!.ran.get(session) ?? [])].sort();
      expect(ranOn).toEqual(["m0", "m1", "m2", "m3", "m4", "m5"]);
    }
    // Some sessions moved: their shards prefer the newcomer.
    expect(b!.ran.size).toBeGreaterThan(0);
  });

  it("a host leaving hands its shards over while requests run: none lost, none run twice", async () => {
    const prefix = uniqueRoot();
    const a = await startHost(prefix, "ha");
    const b = await startHost(prefix, "hb");
    await waitFor(
      () =>
        a.cluster.shards.heldCount + b.cluster.shards.heldCount === SHARDS &&
        a.cluster.shards.heldCount > 0 &&
        b.cluster.shards.heldCount > 0,
      15_000,
    );
    const sessions = Array.from({ length: 24 }, (_, index) => `s${index}`);
    const replies = await traffic(prefix, sessions, 6, async () => {
      await waitFor(() => b.ran.size >= 2, 60_000);
      await b.host.close({ graceMs: 5_000 });
    });
    expect(replies.filter((reply) => (reply as { ok: boolean }).ok !== true)).toEqual([]);
    await waitFor(() => a.cluster.shards.heldCount === SHARDS, 60_000);
    for (const session of sessions) {
      const ranOn = [...(a.ran.get(session) ?? []), ...(b.ran.get(session) ?? [])].sort();
      expect(ranOn).toEqual(["m0", "m1", "m2", "m3", "m4", "m5"]);
    }
  });
});

describe("the shard count", () => {
  it("must be the same on every host: a host with another one refuses to start, saying why", async () => {
    const prefix = uniqueRoot();
    await startHost(prefix, "ha", SHARDS);
    const bus = await NatsBus.connect({ url: server.url, name: "hb" });
    cleanups.push(() => bus.close());
    const starting = SessionCluster.startOrExplain({
      connection: bus.connection,
      prefix,
      hostId: "hb",
      timing: leaseTiming(3_000),
      shardCount: 32,
    });
    await expect(starting).rejects.toThrow(ShardCountMismatchError);
    await expect(starting).rejects.toThrow(/--shards 32 differs from host ha's --shards 16/);
  });
});

describe("the agents of hosts that share a prefix", () => {
  it("are the same set, or sets with no agent in common: an overlap refuses to start, saying why", async () => {
    const prefix = uniqueRoot();
    await startHost(prefix, "ha", SHARDS);
    const bus = await NatsBus.connect({ url: server.url, name: "hc" });
    cleanups.push(() => bus.close());
    const options = { connection: bus.connection, prefix, timing: leaseTiming(3_000), shardCount: SHARDS };
    // Other agents altogether: shards of their own, side by side.
    const other = await SessionCluster.start({ ...options, hostId: "hc", agents: ["writer"] });
    cleanups.push(() => other.close());
    expect(other.shards.shardOf("writer", "s1")).toBeGreaterThanOrEqual(0);
    // "bot" and more: a session of bot could belong to two hosts' shards.
    const starting = SessionCluster.startOrExplain({ ...options, hostId: "hd", agents: ["bot", "critic"] });
    await expect(starting).rejects.toThrow(AgentSetOverlapError);
    await expect(starting).rejects.toThrow(
      /this host serves bot, critic and host ha serves bot: hosts on one NATS system/,
    );
  });
});
