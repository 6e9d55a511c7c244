import { jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CREATION_RACE_TRIES } from "../../src/bus/jetstream-retry.js";
import { membersBucketName } from "../../src/cluster/membership.js";
import { SessionCluster } from "../../src/cluster/session-cluster.js";
import { leaseTiming } from "../../src/cluster/session-lease.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type NatsServer, startNatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * How a host opens its lease and reply buckets: a server that answers "no JetStream" leaves the
 * host alone (one host only, logged); a JetStream that does not answer is retried, then fails the
 * start, since a host of a cluster must not run without leases.
 */

let withJetStream: NatsServer;
let withoutJetStream: NatsServer;
const connections: NatsConnection[] = [];

beforeAll(async () => {
  withJetStream = await workerNatsServer();
  withoutJetStream = await startNatsServer({ jetStream: false });
});

afterAll(async () => {
  await Promise.all(connections.splice(0).map((connection) => connection.close()));
  await withJetStream.stop();
  await withoutJetStream.stop();
});

async function connectTo(server: NatsServer): Promise<NatsConnection> {
  const connection = await connect({ servers: server.url });
  connections.push(connection);
  return connection;
}

function options(connection: NatsConnection, log: string[] = []) {
  return {
    connection,
    prefix: uniqueRoot(),
    hostId: "h1",
    timing: leaseTiming(2_000),
    log: (line: string) => log.push(line),
  };
}

/**
 * A start's settings on the server with JetStream, and another stream already holding the subjects
 * of the members bucket the start creates first; `removeOther` deletes that stream.
 */
async function membersSubjectsTaken() {
  const connection = await connectTo(withJetStream);
  const settings = options(connection);
  const manager = await jetstreamManager(connection);
  const bucket = membersBucketName(settings.prefix);
  await manager.streams.add({ name: `OTHER_${bucket}`, subjects: [`$KV.${bucket}.>`] });
  return { settings, removeOther: () => manager.streams.delete(`OTHER_${bucket}`) };
}

describe("starting the session cluster", () => {
  it("opens the buckets on a server with JetStream", async () => {
    const started = await SessionCluster.startOrExplain(options(await connectTo(withJetStream)));
    expect(started).toBeInstanceOf(SessionCluster);
  });

  it("says why, at once, when the server has no JetStream", async () => {
    const log: string[] = [];
    const started = await SessionCluster.startOrExplain(options(await connectTo(withoutJetStream), log), {
      retryForMs: 60_000,
    });
    expect(started).toEqual({ unavailable: expect.stringMatching(/jetstream/i) });
    expect(log).toEqual([]);
  });

  it("retries a JetStream API that does not answer, and takes the answer that comes", async () => {
    const connection = await connectTo(withoutJetStream);
    // Something holds the JetStream API subjects and never answers: the first attempt times out.
    const silent = connection.subscribe("$JS.API.>", { callback: () => {} });
    await connection.flush();
    const log: string[] = [];
    const started = await SessionCluster.startOrExplain(
      { ...options(connection), log: (line) => log.push(line) && silent.unsubscribe() },
      { retryForMs: 60_000, delayMs: 1 },
    );
    expect(log).toEqual([expect.stringMatching(/^session leases: attempt 1 failed \(.*\); trying again$/)]);
    expect(started).toEqual({ unavailable: expect.stringMatching(/jetstream/i) });
  });

  it("fails the start when the JetStream API stays silent past the retry time", async () => {
    const connection = await connectTo(withoutJetStream);
    const silent = connection.subscribe("$JS.API.>", { callback: () => {} });
    await connection.flush();
    const failure = await SessionCluster.startOrExplain(options(connection), { retryForMs: 1 }).catch(
      (error: unknown) => error,
    );
    silent.unsubscribe();
    expect(failure).toBeInstanceOf(Error);
    expect(String(failure)).toMatch(/timeout/i);
  });

  it("asks again when the members bucket's subjects were taken a moment before (another host creating it)", async () => {
    // What the server shows one of two hosts creating the same bucket at once: its subjects are
    // already in a stream being made. Gone by the next try, as the other host's creation is done.
    const { settings, removeOther } = await membersSubjectsTaken();
    const log: string[] = [];
    const started = await SessionCluster.startOrExplain(
      {
        ...settings,
        log: (line) => {
          log.push(line);
          void removeOther();
        },
      },
      { retryForMs: 60_000, delayMs: 200 },
    );
    expect(log[0]).toMatch(
      /^session leases: attempt 1 failed \(subjects overlap with an existing stream\); trying again$/,
    );
    expect(started).toBeInstanceOf(SessionCluster);
    await (started as SessionCluster).close();
  });

  it("gives a lasting subject overlap up after a few tries and says so", async () => {
    const { settings, removeOther } = await membersSubjectsTaken();
    const log: string[] = [];
    const started = await SessionCluster.startOrExplain(
      { ...settings, log: (line) => log.push(line) },
      { retryForMs: 60_000, delayMs: 1 },
    );
    expect(started).toEqual({ unavailable: "subjects overlap with an existing stream" });
    expect(log).toHaveLength(CREATION_RACE_TRIES);
    await removeOther();
  });

  it("refuses a host id that is not one subject token, without retrying", async () => {
    const log: string[] = [];
    const failure = await SessionCluster.startOrExplain(
      { ...options(await connectTo(withJetStream), log), hostId: "a.b" },
      { retryForMs: 60_000 },
    ).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(RangeError);
    expect(log).toEqual([]);
  });
});
