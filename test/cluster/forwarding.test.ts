import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, controlSubject } from "../../src/bus/subjects.js";
import { type DedupedChat, RequestDedupe } from "../../src/cluster/request-dedupe.js";
import { hostSubject, SessionCluster } from "../../src/cluster/session-cluster.js";
import { leaseTiming } from "../../src/cluster/session-lease.js";
import { AgentHost } from "../../src/host/agent-host.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { FakeAgent } from "../host/fake-agent.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * In process: two AgentHosts with their own NATS connections and session clusters, fake
 * agents. Requests are sent to one host's own subject so the test decides which host gets them.
 */

let server: NatsServer;
let client: NatsBus;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
  client = await NatsBus.connect({ url: server.url, name: "forwarding-test" });
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  await client.close();
  await server.stop();
});

/**
 * Long enough that an in-process host keeps its leases through a loaded machine's pauses (renewed
 * every TTL/3, held locally until TTL minus a fifth); the vanished-owner test waits this out once.
 */
const LEASE_MS = 5_000;

interface TestHost {
  host: AgentHost;
  bus: NatsBus;
  cluster: SessionCluster;
  /** The fake agent of each session this host built. */
  agents: Map<string, FakeAgent>;
}

/** Few shards, so the hosts settle at once; the rules are the same as with 1,024. */
const SHARDS = 16;

async function startHost(prefix: string, hostId: string): Promise<TestHost> {
  const bus = await NatsBus.connect({ url: server.url, name: hostId });
  const cluster = await SessionCluster.start({
    connection: bus.connection,
    prefix,
    hostId,
    timing: leaseTiming(LEASE_MS),
    shardCount: SHARDS,
  });
  const agents = new Map<string, FakeAgent>();
  const host = new AgentHost({
    bus,
    prefix,
    agents: ["bot"],
    hostId,
    cluster,
    createAgent: async (name, session) => {
      const agent = new FakeAgent({ name, session });
      agents.set(session, agent);
      return agent;
    },
  }).start();
  cleanups.push(async () => {
    await host.close({ graceMs: 0 });
    await bus.close();
  });
  await bus.connection.flush();
  return { host, bus, cluster, agents };
}

/** Waits until every shard is held by one of `hosts` and each holds its preferred ones. */
async function untilBalanced(...hosts: TestHost[]): Promise<void> {
  await waitFor(() => {
    const held = hosts.map(({ cluster }) => cluster.shards.heldCount);
    return held.reduce((sum, count) => sum + count, 0) === SHARDS && held.every((count) => count > 0);
  }, 15_000);
}

/** A session name whose shard `owner` serves now. */
function sessionOn(owner: TestHost, stem = "s"): string {
  for (let index = 0; ; index++) {
    const session = `${stem}${index}`;
    if (owner.cluster.shards.isServing(owner.cluster.shardOf("bot", session))) return session;
  }
}

async function ask(subject: string, payload: unknown): Promise<unknown> {
  return JSON.parse((await client.request(subject, JSON.stringify(payload), { timeoutMs: 15_000 })).data);
}

describe("requests for a session whose shard another host owns", () => {
  it("are forwarded to the owner, chats and control verbs alike, and the owner answers", async () => {
    const prefix = uniqueRoot();
    const a = await startHost(prefix, "ha");
    const b = await startHost(prefix, "hb");
    await untilBalanced(a, b);
    const sa = sessionOn(a, "a");
    const sb = sessionOn(b, "b");
    const toA = (verb: "chat" | "control") => `${hostSubject(prefix, "ha")}.agents.bot.${verb}`;
    const toB = (verb: "chat" | "control") => `${hostSubject(prefix, "hb")}.agents.bot.${verb}`;
    expect(await ask(toA("chat"), { session: sa, text: "one" })).toMatchObject({
      ok: true,
      result: "echo: one",
    });
    // Sent to b: a owns the session's shard, so a answers, and b never builds the session.
    expect(await ask(toB("chat"), { session: sa, text: "two" })).toMatchObject({
      ok: true,
      result: "echo: two",
    });
    expect(await ask(toB("control"), { session: sa, command: "new" })).toEqual({ ok: true });
    expect(await ask(toB("control"), { session: sa, command: "compact", topic: "x" })).toEqual({
      ok: true,
    });
    const owned = a.agents.get(sa)!;
    expect(owned.chats.map((chat) => chat.text)).toEqual(["one", "two"]);
    expect(owned.resetCalls).toBe(1);
    expect(owned.compactCalls).toEqual(["x"]);
    expect(b.agents.has(sa)).toBe(false);
    expect(a.host.sessions.size).toBe(1);
    expect(b.host.sessions.size).toBe(0);
    // Sent to a, a session of b's shard runs on b.
    expect(await ask(toA("chat"), { session: sb, text: "hi" })).toMatchObject({ ok: true });
    expect(b.agents.has(sb)).toBe(true);
    // Through the shared queue group either host may get it: the owner always answers.
    for (let round = 0; round < 6; round++) {
      await ask(chatSubject(prefix, "bot"), { session: sa, text: `q${round}` });
      await ask(controlSubject(prefix, "bot"), { session: sb, command: "compact" });
    }
    expect(a.agents.get(sa)!.chats).toHaveLength(8);
    expect(b.agents.get(sb)!.compactCalls).toHaveLength(6);
    expect(b.agents.has(sa)).toBe(false);
    expect(a.agents.has(sb)).toBe(false);
  });

  it("keep the caller's headers (lineage, trace context, a parent's lease) when forwarded", async () => {
    const prefix = uniqueRoot();
    const a = await startHost(prefix, "ha");
    const target = `${hostSubject(prefix, "hb")}.agents.bot.chat`;
    const received = new Promise<Record<string, string>>((resolve) => {
      const subscription = client.connection.subscribe(target, {
        max: 1,
        callback: (_error, message) => {
          const headers: Record<string, string> = {};
          for (const [key, values] of message.headers ?? []) headers[key] = values[0]!;
          resolve(headers);
        },
      });
      cleanups.push(async () => subscription.unsubscribe());
    });
    await client.connection.flush();
    const refused = a.cluster.forward(hostSubject(prefix, "hb"), "bot", "chat", {
      subject: chatSubject(prefix, "bot"),
      data: JSON.stringify({ session: "s", text: "hi" }),
      headers: {
        traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "Agentloop-Lineage": "lineage",
      },
    });
    expect(refused).toBeUndefined();
    const headers = await received;
    expect(headers.traceparent).toBe("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    expect(headers["Agentloop-Lineage"]).toBe("lineage");
    expect(headers["Agentloop-Forward-Hops"]).toBe("1");
  });

  it("wait for the shard lease of an owner that vanished (killed) to expire, then run on a live host", async () => {
    const prefix = uniqueRoot();
    const a = await startHost(prefix, "ha");
    const b = await startHost(prefix, "hb");
    await untilBalanced(a, b);
    const sa = sessionOn(a);
    await ask(`${hostSubject(prefix, "ha")}.agents.bot.chat`, { session: sa, text: "one" });
    // a's connection goes away without a word (as with kill -9): its leases stay until they expire.
    await a.bus.connection.close();
    const reply = await ask(`${hostSubject(prefix, "hb")}.agents.bot.chat`, { session: sa, text: "two" });
    expect(reply).toMatchObject({ ok: true, result: "echo: two" });
    expect(b.agents.get(sa)!.chats.map((chat) => chat.text)).toEqual(["two"]);
    expect(b.host.sessions.find("bot", sa)).toBeDefined();
    // Every shard a held is b's now.
    await waitFor(() => b.cluster.shards.heldCount === SHARDS, 60_000);
  });

  it("move to another host once the owner released them (shut down)", async () => {
    const prefix = uniqueRoot();
    const a = await startHost(prefix, "ha");
    const b = await startHost(prefix, "hb");
    await untilBalanced(a, b);
    const sa = sessionOn(a);
    await ask(`${hostSubject(prefix, "ha")}.agents.bot.chat`, { session: sa, text: "one" });
    await a.host.close({ graceMs: 0 });
    expect(
      await ask(`${hostSubject(prefix, "hb")}.agents.bot.chat`, { session: sa, text: "two" }),
    ).toMatchObject({
      ok: true,
      result: "echo: two",
    });
    expect(b.agents.get(sa)!.chats.map((chat) => chat.text)).toEqual(["two"]);
    await waitFor(() => b.cluster.shards.heldCount === SHARDS, 60_000);
  });
});

describe("the request dedupe", () => {
  const usage = { prompt: 1, completion: 1, total: 2, cached: 0 };
  const replyOf = (result: string): DedupedChat => ({ reply: { ok: true, session: "s1", result, usage } });

  it("runs one chat per id and session, joins a running one, replays a finished one", async () => {
    const prefix = uniqueRoot();
    const dedupe = await RequestDedupe.open(client.connection, { prefix, hostId: "ha" });
    let runs = 0;
    let finish = () => {};
    const chat = () =>
      new Promise<DedupedChat>((resolve) => {
        runs++;
        finish = () => resolve(replyOf(`run ${runs}`));
      });
    const first = dedupe.answer("bot", "s1", "id-1", chat);
    const joined = dedupe.answer("bot", "s1", "id-1", chat);
    await waitFor(() => runs === 1);
    finish();
    expect(await first).toMatchObject({ result: "run 1" });
    expect(await joined).toMatchObject({ result: "run 1" });
    expect(await dedupe.answer("bot", "s1", "id-1", chat)).toMatchObject({ result: "run 1" });
    // Another host reads the stored reply too; another session or id is another chat.
    const other = await RequestDedupe.open(client.connection, { prefix, hostId: "hb" });
    expect(await other.answer("bot", "s1", "id-1", chat)).toMatchObject({ result: "run 1" });
    expect(runs).toBe(1);
    const second = other.answer("bot", "s2", "id-1", chat);
    await waitFor(() => runs === 2);
    finish();
    expect(await second).toMatchObject({ result: "run 2" });
  });

  it("never runs again a chat another host started and did not finish (its host died)", async () => {
    const prefix = uniqueRoot();
    const dying = await RequestDedupe.open(client.connection, { prefix, hostId: "ha" });
    let runs = 0;
    // The first host marks the chat running, then dies before it answers.
    void dying.answer("bot", "s1", "id-9", () => {
      runs++;
      return new Promise(() => {});
    });
    await waitFor(() => runs === 1);
    const next = await RequestDedupe.open(client.connection, { prefix, hostId: "hb" });
    const reply = await next.answer("bot", "s1", "id-9", async () => {
      runs++;
      return replyOf("again");
    });
    expect(reply).toMatchObject({ ok: false, error: { code: "cancelled" } });
    expect(runs).toBe(1);
  });

  it("lets a retry run a chat that never ran (its session could not start)", async () => {
    const prefix = uniqueRoot();
    const dedupe = await RequestDedupe.open(client.connection, { prefix, hostId: "ha" });
    const refused = await dedupe.answer("bot", "s1", "id-3", async () => ({
      reply: { ok: false, error: { code: "cancelled", message: "the host is shutting down" } },
      ran: false,
    }));
    expect(refused).toMatchObject({ ok: false });
    expect(await dedupe.answer("bot", "s1", "id-3", async () => replyOf("ran"))).toMatchObject({
      result: "ran",
    });
  });
});

describe("a chat request with an id, on the host that owns its session", () => {
  it("is answered why when its session cannot start, and its retry runs once it can; later retries get the stored reply", async () => {
    const prefix = uniqueRoot();
    const bus = await NatsBus.connect({ url: server.url, name: "hc" });
    const cluster = await SessionCluster.start({
      connection: bus.connection,
      prefix,
      hostId: "hc",
      timing: leaseTiming(LEASE_MS),
    });
    let builds = 0;
    const agents: FakeAgent[] = [];
    const host = new AgentHost({
      bus,
      prefix,
      agents: ["bot"],
      hostId: "hc",
      cluster,
      createAgent: async (name, session) => {
        builds++;
        if (builds === 1) throw new Error("the history store is unreachable");
        const agent = new FakeAgent({ name, session });
        agents.push(agent);
        return agent;
      },
    }).start();
    cleanups.push(async () => {
      await host.close({ graceMs: 0 });
      await bus.close();
    });
    // The host's subscriptions reach the server before the first request does (another connection).
    await bus.connection.flush();
    const subject = chatSubject(prefix, "bot");
    expect(await ask(subject, { session: "s1", text: "hello", id: "r1" })).toMatchObject({
      ok: false,
      error: { code: "internal", message: expect.stringContaining("the history store is unreachable") },
      id: "r1",
    });
    // Nothing ran, so nothing was stored under r1: the retry runs the chat.
    expect(await ask(subject, { session: "s1", text: "hello", id: "r1" })).toMatchObject({
      ok: true,
      result: "echo: hello",
      id: "r1",
    });
    expect(await ask(subject, { session: "s1", text: "hello", id: "r1" })).toMatchObject({
      ok: true,
      result: "echo: hello",
      id: "r1",
    });
    expect(agents.flatMap((agent) => agent.chats.map((chat) => chat.text))).toEqual(["hello"]);
  });
});
