import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { jetStreamName } from "../../src/bus/subjects.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { startServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, runCli } from "../support/cli.js";
import { type NatsServer, startNatsCluster, workerNatsServer } from "../support/nats-server.js";

/**
 * `--js-replicas N`: the replicas of the streams and KV buckets a host creates, on a
 * real three-node JetStream cluster (what docker-compose.yml runs), and what it leaves alone on a
 * single server where they already exist.
 */

/** The JetStream streams behind everything a host with `--history nats` creates (KV buckets are `KV_` streams). */
function streamsOf(prefix: string): string[] {
  return [
    jetStreamName(prefix, "EVENTS"),
    jetStreamName(prefix, "HISTORY"),
    `KV_${jetStreamName(prefix, "SHARDS")}`,
    `KV_${jetStreamName(prefix, "MEMBERS")}`,
    `KV_${jetStreamName(prefix, "REPLIES")}`,
    `KV_${jetStreamName(prefix, "JOURNAL")}`,
  ];
}

async function replicasOf(bus: NatsBus, prefix: string): Promise<Record<string, number>> {
  const manager = await jetstreamManager(bus.connection);
  const replicas: Record<string, number> = {};
  for (const name of streamsOf(prefix)) {
    replicas[name] = (await manager.streams.info(name)).config.num_replicas;
  }
  return replicas;
}

async function untilJetStreamAnswers(bus: NatsBus, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (true) {
    try {
      // Asks the account info: fails (times out) while no meta leader answers.
      await jetstreamManager(bus.connection, { timeout: 2_000 });
      return;
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

describe("--js-replicas", () => {
  let server: NatsServer;
  let bus: NatsBus;
  const prefixes: string[] = [];

  beforeAll(async () => {
    server = await workerNatsServer();
    bus = await NatsBus.connect({ url: server.url, name: "js-replicas-test" });
  });

  afterAll(async () => {
    const manager = await jetstreamManager(bus.connection);
    for (const name of prefixes.flatMap(streamsOf)) await manager.streams.delete(name).catch(() => false);
    await bus.close();
    await server.stop();
  });

  it.each([["0"], ["6"], ["two"], ["1.5"]])("refuses --js-replicas %s before connecting", async (value) => {
    const run = await runCli(["serve", "--nats", "nats://127.0.0.1:1", "--js-replicas", value]);
    expect(run).toEqual({
      code: 2,
      stdout: "",
      stderr: `agentloop: --js-replicas must be a whole number from 1 to 5, got "${value}"\n`,
    });
  });

  it("reads AGENTLOOP_JS_REPLICAS too", async () => {
    const run = await runCli(["serve", "--nats", "nats://127.0.0.1:1"], {
      env: { AGENTLOOP_JS_REPLICAS: "9" },
    });
    expect(run.stderr).toBe('agentloop: --js-replicas must be a whole number from 1 to 5, got "9"\n');
  });

  it("asks a single server for the replicas when it creates the streams (the server refuses more than 1)", async () => {
    const prefix = uniqueRoot();
    prefixes.push(prefix);
    const run = await runCli([
      "serve",
      "--nats",
      server.url,
      "--prefix",
      prefix,
      "--history",
      "nats",
      "--js-replicas",
      "2",
    ]);
    expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 2, stdout: "" });
    expect(linesOf(run.stderr)).toEqual([
      expect.stringMatching(
        /^agentloop: --history nats: cannot open the JetStream history stream: .*replicas/,
      ),
    ]);
  });

  it("leaves the replicas of existing streams and buckets as they are", async () => {
    const prefix = uniqueRoot();
    prefixes.push(prefix);
    const first = startServe(["--nats", server.url, "--prefix", prefix, "--history", "nats"]);
    await waitUntilServing(bus, prefix, first);
    expect((await first.stop()).code).toBe(0);
    // All six exist now with 1 replica; a host asking for 3 opens them as they are (a single
    // server would refuse to create any of them with 3).
    const second = startServe([
      "--nats",
      server.url,
      "--prefix",
      prefix,
      "--history",
      "nats",
      "--js-replicas",
      "3",
    ]);
    await waitUntilServing(bus, prefix, second);
    const run = await second.stop();
    expect(run.code).toBe(0);
    expect(run.stderr).not.toMatch(/no event log|no session leases/);
    expect(Object.values(await replicasOf(bus, prefix))).toEqual([1, 1, 1, 1, 1, 1]);
  });
});

describe("--js-replicas 3 on a three-node JetStream cluster", () => {
  it("creates the event log, the history, and the shard, member, reply and journal buckets with 3 replicas", async () => {
    const cluster = await startNatsCluster(3);
    const bus = await NatsBus.connect({ url: cluster.url, name: "js-replicas-cluster-test" });
    try {
      // The servers accept clients before their JetStream meta group has a leader.
      await untilJetStreamAnswers(bus, 30_000);
      const serve = startServe([
        "--nats",
        cluster.url,
        "--history",
        "nats",
        "--js-replicas",
        "3",
        "--host-id",
        "host-1",
      ]);
      await waitUntilServing(bus, "agentloop", serve, "assistant", 30_000);
      const chat = await runCli([
        "chat",
        "--nats",
        cluster.urls[1]!,
        "--session",
        "s1",
        "--events",
        "none",
        "hello",
      ]);
      expect(chat.code).toBe(0);
      const sessions = await runCli(["sessions", "--nats", cluster.urls[2]!]);
      expect(sessions.stdout).toMatch(/^assistant\/s1 {2}host host-1 /m);
      const run = await serve.stop();
      expect(run.code).toBe(0);
      expect(run.stderr).not.toMatch(/no event log|no session leases/);
      expect(await replicasOf(bus, "agentloop")).toEqual(
        Object.fromEntries(streamsOf("agentloop").map((name) => [name, 3])),
      );
    } finally {
      await bus.close();
      await cluster.stop();
    }
  }, 90_000);
});
