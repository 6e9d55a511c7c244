import { Kvm } from "@nats-io/kv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { fenceHistory, LeaseLostError } from "../../src/cluster/lease-fence.js";
import { LeaseKeeper } from "../../src/cluster/lease-keeper.js";
import {
  isConflict,
  LeaseConflictError,
  leaseTiming,
  SessionLeaseStore,
  SessionOwnedElsewhereError,
  sessionBucketName,
} from "../../src/cluster/session-lease.js";
import { InMemoryContextHistory } from "../../src/context/in-memory-history.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, startRestartableNatsServer, workerNatsServer } from "../support/nats-server.js";

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "session-lease-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

/** Two hosts' views of one fresh bucket, each with its own settable wall clock. */
async function twoStores(ttlMs = 1_000) {
  const prefix = uniqueRoot();
  const clocks = { a: 1_000_000, b: 1_000_000 };
  const timing = leaseTiming(ttlMs);
  const a = await SessionLeaseStore.open(bus.connection, { prefix, timing, now: () => clocks.a });
  const b = await SessionLeaseStore.open(bus.connection, { prefix, timing, now: () => clocks.b });
  return { a, b, clocks, timing, prefix };
}

describe("the session lease bucket", () => {
  it("names the bucket after the prefix", () => {
    expect(sessionBucketName("agentloop")).toBe("AGENTLOOP_SESSIONS");
    expect(sessionBucketName("acme.bots")).toBe("ACME_BOTS_SESSIONS");
  });

  it("gives a free session to the first host, epoch 1, and refuses it to a second one while live", async () => {
    const { a, b } = await twoStores();
    const lease = await a.acquire("bot", "s1", "host-a");
    expect(lease.record).toMatchObject({ host: "host-a", epoch: 1, expiresAt: 1_001_000 });
    const refused = await b.acquire("bot", "s1", "host-b").catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SessionOwnedElsewhereError);
    expect((refused as SessionOwnedElsewhereError).owner).toMatchObject({ host: "host-a", epoch: 1 });
  });

  it("renews with compare-and-set: a renewal naming an old revision is a conflict", async () => {
    const { a, clocks } = await twoStores();
    const first = await a.acquire("bot", "s1", "host-a");
    clocks.a += 300;
    const renewed = await a.renew(first, { state: "busy" });
    expect(renewed.revision).toBeGreaterThan(first.revision);
    expect(renewed.record).toMatchObject({ epoch: 1, expiresAt: 1_001_300, state: "busy" });
    await expect(a.renew(first)).rejects.toBeInstanceOf(LeaseConflictError);
    expect((await a.read("bot", "s1"))?.record.expiresAt).toBe(1_001_300);
  });

  it("lets another host take an expired lease only after the skew margin, bumping the epoch", async () => {
    const { a, b, clocks, timing } = await twoStores();
    const held = await a.acquire("bot", "s1", "host-a");
    // Past the expiry but within the skew margin: still the first host's.
    clocks.b = held.record.expiresAt + timing.skewMs;
    await expect(b.acquire("bot", "s1", "host-b")).rejects.toBeInstanceOf(SessionOwnedElsewhereError);
    clocks.b += 1;
    const taken = await b.acquire("bot", "s1", "host-b");
    expect(taken.record).toMatchObject({ host: "host-b", epoch: 2 });
    // The old owner's renewal now fails: it has lost the session.
    await expect(a.renew(held)).rejects.toBeInstanceOf(LeaseConflictError);
  });

  it("keeps the epoch over a release, so the next owner's epoch is higher", async () => {
    const { a, b } = await twoStores();
    const first = await a.acquire("bot", "s1", "host-a");
    expect(await a.release(first)).toBe(true);
    expect((await b.read("bot", "s1"))?.record).toMatchObject({ released: true, epoch: 1 });
    expect((await b.acquire("bot", "s1", "host-b")).record).toMatchObject({ host: "host-b", epoch: 2 });
    // A release naming an old revision leaves the new owner's lease alone.
    expect(await a.release(first)).toBe(false);
    expect((await a.read("bot", "s1"))?.record.host).toBe("host-b");
  });

  it("lets exactly one of many concurrent acquirers win", async () => {
    const { prefix, timing } = await twoStores();
    const stores = await Promise.all(
      Array.from({ length: 6 }, () => SessionLeaseStore.open(bus.connection, { prefix, timing })),
    );
    const outcomes = await Promise.allSettled(
      stores.map((store, index) => store.acquire("bot", "race", `host-${index}`)),
    );
    const winners = outcomes.filter((outcome) => outcome.status === "fulfilled");
    expect(winners).toHaveLength(1);
    for (const outcome of outcomes) {
      if (outcome.status === "rejected") expect(outcome.reason).toBeInstanceOf(SessionOwnedElsewhereError);
    }
  });

  it("lists stored leases with their agent and session", async () => {
    const { a } = await twoStores();
    await a.acquire("bot", "s2", "host-a");
    await a.acquire("bot", "s1", "host-a");
    expect((await a.list()).map((lease) => [lease.agent, lease.session])).toEqual([
      ["bot", "s1"],
      ["bot", "s2"],
    ]);
  });

  it("lists each lease once while the leases are renewed under it", async () => {
    const { a } = await twoStores(60_000);
    const sessions = Array.from({ length: 30 }, (_, index) => `s${String(index).padStart(2, "0")}`);
    let leases = await Promise.all(sessions.map((session) => a.acquire("bot", session, "host-a")));
    let renewing = true;
    const renewals = (async () => {
      while (renewing) leases = await Promise.all(leases.map((lease) => a.renew(lease, { state: "busy" })));
    })();
    try {
      for (let round = 0; round < 10; round++) {
        expect((await a.list()).map((lease) => lease.session)).toEqual(sessions);
      }
    } finally {
      renewing = false;
      await renewals;
    }
  });
});

/**
 * The lease time of keepers that must keep their leases while a test runs: renewed every second,
 * held locally for 2.4 s after each renewal was sent, so a loaded machine's pauses do not lapse it
 * (a 900 ms lease did). Tests of expiry itself use shorter ones.
 */
const LIVE_LEASE_MS = 3_000;

describe("the lease keeper", () => {
  it("fences: past its local deadline the lease refuses writes, and onLost stops the session", async () => {
    const prefix = uniqueRoot();
    const store = await SessionLeaseStore.open(bus.connection, { prefix, timing: leaseTiming(600) });
    let monotonic = 0;
    const lost: string[] = [];
    const keeper = new LeaseKeeper({
      store,
      hostId: "host-a",
      subject: `${prefix}.hosts.host-a`,
      monotonic: () => monotonic,
      onLost: (agent, session, reason) => lost.push(`${agent}/${session}: ${reason}`),
    });
    const fence = await keeper.acquire("bot", "s1");
    const history = fenceHistory(new InMemoryContextHistory(), fence);
    await history.append([{ role: "user", content: "before" }]);
    expect(fence.epoch).toBe(1);
    // The local deadline is the TTL minus the skew margin (600 − 120 ms) after the request was sent.
    monotonic = 479;
    expect(() => fence.assertHeld()).not.toThrow();
    monotonic = 480;
    expect(() => fence.assertHeld()).toThrow(LeaseLostError);
    await expect(history.append([{ role: "user", content: "after" }])).rejects.toBeInstanceOf(LeaseLostError);
    expect(await history.restore()).toEqual([{ role: "user", content: "before" }]);
    expect(lost).toEqual([]);
    await keeper.close();
  });

  it("stops the session at its local deadline when no renewal gets through (NATS away, a pause)", async () => {
    const prefix = uniqueRoot();
    const store = await SessionLeaseStore.open(bus.connection, { prefix, timing: leaseTiming(600) });
    // Renewals hang, as they do while the server is unreachable.
    store.renew = () => new Promise(() => {});
    const lost: string[] = [];
    const keeper = new LeaseKeeper({
      store,
      hostId: "host-a",
      subject: `${prefix}.hosts.host-a`,
      onLost: (agent, session, reason) => lost.push(`${agent}/${session}: ${reason}`),
    });
    const fence = await keeper.acquire("bot", "s1");
    await waitFor(() => lost.length === 1, 60_000);
    expect(lost).toEqual(["bot/s1: its lease was not renewed in time"]);
    expect(() => fence.assertHeld()).toThrow(LeaseLostError);
    expect(keeper.holds("bot", "s1")).toBe(false);
    await keeper.close();
  });

  it("renews while held, reports a takeover as lost, and releases at close", async () => {
    const prefix = uniqueRoot();
    const timing = leaseTiming(LIVE_LEASE_MS);
    const store = await SessionLeaseStore.open(bus.connection, { prefix, timing });
    const lost: string[] = [];
    const keeper = new LeaseKeeper({
      store,
      hostId: "host-a",
      subject: `${prefix}.hosts.host-a`,
      stateOf: () => "busy",
      onLost: (_agent, session, reason) => lost.push(`${session}: ${reason}`),
    });
    await keeper.acquire("bot", "kept");
    const taken = await keeper.acquire("bot", "taken");
    const first = (await store.read("bot", "kept"))!.revision;
    // Renewals every TTL/3 move the revision on and carry the session's state.
    const renewedAt = Date.now();
    let renewed = first;
    while (renewed === first && Date.now() - renewedAt < 15_000) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      renewed = (await store.read("bot", "kept"))!.revision;
    }
    expect(renewed).toBeGreaterThan(first);
    expect((await store.read("bot", "kept"))?.record.state).toBe("busy");
    // Another host overwrites "taken" (as after an expiry): the next renewal conflicts.
    const current = (await store.read("bot", "taken"))!;
    await store.renew({ ...current, record: { ...current.record, host: "host-b", epoch: taken.epoch + 1 } });
    await waitFor(() => lost.length === 1, 60_000);
    expect(lost).toEqual(["taken: another host took its lease"]);
    expect(keeper.holds("bot", "kept")).toBe(true);
    await keeper.close();
    expect((await store.read("bot", "kept"))?.record.released).toBe(true);
    expect((await store.read("bot", "taken"))?.record.host).toBe("host-b");
  });

  it("keeps a lease whose renewal was stored though its answer was lost (the revision moved, the epoch did not)", async () => {
    const prefix = uniqueRoot();
    const store = await SessionLeaseStore.open(bus.connection, {
      prefix,
      timing: leaseTiming(LIVE_LEASE_MS),
    });
    const lost: string[] = [];
    const keeper = new LeaseKeeper({
      store,
      hostId: "host-a",
      subject: `${prefix}.hosts.host-a`,
      onLost: (_agent, session, reason) => lost.push(`${session}: ${reason}`),
    });
    await keeper.acquire("bot", "s1");
    // What a renewal that timed out after the server stored it leaves: a newer revision, same owner.
    const stored = (await store.read("bot", "s1"))!;
    const moved = await store.renew(stored);
    // The keeper's next renewal conflicts, finds its own lease, and renews from there.
    const waitedSince = Date.now();
    while (
      ((await store.read("bot", "s1"))?.revision ?? 0) <= moved.revision &&
      Date.now() - waitedSince < 15_000
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect((await store.read("bot", "s1"))?.revision).toBeGreaterThan(moved.revision);
    expect(lost).toEqual([]);
    expect(keeper.holds("bot", "s1")).toBe(true);
    await keeper.close();
  });

  it("keeps its leases through a NATS restart shorter than the lease", async () => {
    const restartable = await startRestartableNatsServer();
    const own = await NatsBus.connect({ url: restartable.url, name: "lease-restart" });
    try {
      const prefix = uniqueRoot();
      const store = await SessionLeaseStore.open(own.connection, { prefix, timing: leaseTiming(6_000) });
      const lost: string[] = [];
      const keeper = new LeaseKeeper({
        store,
        hostId: "host-a",
        subject: `${prefix}.hosts.host-a`,
        onLost: (_agent, session, reason) => lost.push(`${session}: ${reason}`),
      });
      await keeper.acquire("bot", "s1");
      const before = (await store.read("bot", "s1"))!.revision;
      await restartable.kill();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      await restartable.restart();
      // Past the local deadline of the lease taken before the kill (6 s − 1.2 s skew).
      await new Promise((resolve) => setTimeout(resolve, 5_500));
      expect(lost).toEqual([]);
      expect(keeper.holds("bot", "s1")).toBe(true);
      expect((await store.read("bot", "s1"))!.revision).toBeGreaterThan(before);
      await keeper.close();
    } finally {
      await own.close();
      await restartable.kill();
    }
  });
});

describe("isConflict", () => {
  it("recognises the real server's compare-and-set refusals by their JetStream code", async () => {
    const kvm = new Kvm(bus.connection);
    const kv = await kvm.create(`conflict_${uniqueRoot()}`);
    const revision = await kv.create("key", "first");
    const created = await kv.create("key", "again").catch((error: unknown) => error);
    const updated = await kv.update("key", "stale", revision + 5).catch((error: unknown) => error);
    expect(created).toBeInstanceOf(Error);
    expect(updated).toBeInstanceOf(Error);
    expect(isConflict(created)).toBe(true);
    expect(isConflict(updated)).toBe(true);
    expect(isConflict(new Error("wrong last sequence: 3"))).toBe(false);
    await kv.destroy();
  });
});
