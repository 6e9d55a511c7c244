import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { LeaseLostError } from "../../src/cluster/lease-fence.js";
import { LeaseKeeper } from "../../src/cluster/lease-keeper.js";
import { leaseTiming, SessionLeaseStore, type StoredLease } from "../../src/cluster/session-lease.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * A host keeps its lease under load: a renewal answered slowly does not hold back the next one, an
 * event-loop stall shorter than the lease's local deadline does not cost the lease, and a lease
 * whose renewals really fail is still given up before another host may take it.
 */

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "lease-renewal-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

/** A promise and the function that settles it. */
function gate(): { opened: Promise<void>; open: () => void } {
  let open = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { opened, open };
}

/** A lease keeper over a fresh bucket, renewing every fifth of the TTL (as a host's own lease does). */
async function keeperOf(ttlMs: number) {
  const prefix = uniqueRoot();
  const store = await SessionLeaseStore.open(bus.connection, { prefix, timing: leaseTiming(ttlMs) });
  const realRenew = store.renew.bind(store);
  const lost: string[] = [];
  const keeper = new LeaseKeeper({
    store,
    hostId: "host-a",
    subject: `${prefix}.hosts.host-a`,
    renewEveryMs: ttlMs / 5,
    onLost: (_agent, session, reason) => lost.push(`${session}: ${reason}`),
  });
  return { store, realRenew, lost, keeper };
}

async function revisionOf(store: SessionLeaseStore): Promise<number> {
  return (await store.read("host", "host-a"))?.revision ?? 0;
}

/** Resolves once the stored lease's revision is past `revision` (or throws after `ms`). */
async function revisionPast(store: SessionLeaseStore, revision: number, ms = 15_000): Promise<number> {
  const since = Date.now();
  for (;;) {
    const now = await revisionOf(store);
    if (now > revision) return now;
    if (Date.now() - since > ms) throw new Error(`the lease stayed at revision ${now}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Keeps this thread busy for `ms`: no timer, no socket read runs meanwhile. */
function busyLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // spin
  }
}

describe("a renewal answered late", () => {
  it("does not hold back the next renewal, and its late answer is not taken for a loss", async () => {
    const { store, realRenew, lost, keeper } = await keeperOf(3_000);
    const late = gate();
    let heldRevision: number | undefined;
    let calls = 0;
    store.renew = async (...args) => {
      calls++;
      const renewed = await realRenew(...args);
      if (heldRevision === undefined) {
        // Stored by the server, but its answer is read only when the gate opens.
        heldRevision = renewed.revision;
        await late.opened;
      }
      return renewed;
    };
    await keeper.acquire("host", "host-a");
    await waitFor(() => heldRevision !== undefined, 60_000);
    // Later ticks send renewals of their own; one conflicts with the stored late one, reads the
    // lease back, finds it this host's, and the next renews from the revision read.
    await revisionPast(store, heldRevision!);
    expect(calls).toBeGreaterThan(1);
    expect(lost).toEqual([]);
    late.open();
    const after = await revisionOf(store);
    await revisionPast(store, after);
    expect(lost).toEqual([]);
    expect(keeper.holds("host", "host-a")).toBe(true);
    await keeper.close();
    expect((await store.read("host", "host-a"))?.record.released).toBe(true);
  });

  it("is sent late with an old revision, conflicts, and the lease is kept", async () => {
    const { store, realRenew, lost, keeper } = await keeperOf(3_000);
    const late = gate();
    let isHeld = false;
    let conflicted = false;
    store.renew = async (...args) => {
      if (!isHeld) {
        // Held before it reaches the server: sent after later renewals moved the revision on.
        isHeld = true;
        await late.opened;
        return realRenew(...args).catch((error: unknown) => {
          conflicted = true;
          throw error;
        });
      }
      return realRenew(...args);
    };
    await keeper.acquire("host", "host-a");
    await waitFor(() => isHeld, 60_000);
    const before = await revisionOf(store);
    await revisionPast(store, before);
    late.open();
    await waitFor(() => conflicted, 60_000);
    await revisionPast(store, await revisionOf(store));
    expect(lost).toEqual([]);
    expect(keeper.holds("host", "host-a")).toBe(true);
    await keeper.close();
  });

  it("extends the lease even when its answer is lost: the read back after a conflict shows its stamp", async () => {
    const { store, realRenew, lost, keeper } = await keeperOf(2_000);
    let stored = 0;
    // Every renewal is stored but its answer never arrives (as when it times out on a busy link).
    store.renew = async (...args) => {
      await realRenew(...args);
      stored++;
      throw new Error("TIMEOUT");
    };
    await keeper.acquire("host", "host-a");
    const since = Date.now();
    // Three TTLs: without the stamp recognised, the lease would lapse at TTL − skew.
    await waitFor(() => Date.now() - since > 6_000 && stored >= 3, 60_000);
    expect(lost).toEqual([]);
    expect(keeper.holds("host", "host-a")).toBe(true);
    await keeper.close();
  });
});

describe("an event-loop stall", () => {
  it("shorter than TTL − skew (60 % of the TTL, twice) does not cost the lease", async () => {
    const ttlMs = 5_000;
    const { store, realRenew, lost, keeper } = await keeperOf(ttlMs);
    let calls = 0;
    let stalls = 0;
    store.renew = (...args) => {
      calls++;
      const renewing = realRenew(...args);
      // The loop stalls right after a renewal was sent: its answer and the request's own timers
      // are read only after the stall.
      if (calls === 2 || calls === 5) {
        setImmediate(() => {
          busyLoop(ttlMs * 0.6);
          stalls++;
        });
      }
      return renewing;
    };
    const fence = await keeper.acquire("host", "host-a");
    await waitFor(() => stalls === 2 || lost.length > 0, 60_000);
    expect(lost).toEqual([]);
    await revisionPast(store, await revisionOf(store));
    expect(lost).toEqual([]);
    expect(keeper.holds("host", "host-a")).toBe(true);
    expect(() => fence.assertHeld()).not.toThrow();
    await keeper.close();
  });
});

describe("a lease whose renewals really fail", () => {
  it("is given up before its expiry, however many renewals are still in flight", async () => {
    const { store, realRenew, lost, keeper } = await keeperOf(1_500);
    let calls = 0;
    let last: StoredLease | undefined;
    const renewing = gate();
    store.renew = async (...args) => {
      calls++;
      if (calls === 1) {
        last = await realRenew(...args);
        return last;
      }
      // The server never answers again (some hang, some are refused).
      if (calls % 2 === 0) await renewing.opened;
      throw new Error("no responders");
    };
    const fence = await keeper.acquire("host", "host-a");
    await waitFor(() => last !== undefined, 60_000);
    const { expiresAt } = last!.record;
    const { skewMs } = store.timing;
    // Another host may take the lease at its stored expiry + skew: this host's fence refuses
    // writes from expiry − skew on, whenever its timers get to run.
    await waitFor(() => store.now() >= expiresAt - skewMs, 60_000);
    expect(() => fence.assertHeld()).toThrow(LeaseLostError);
    await waitFor(() => lost.length === 1, 60_000);
    expect(lost).toEqual(["host-a: its lease was not renewed in time"]);
    expect(calls).toBeGreaterThan(2);
    expect(keeper.holds("host", "host-a")).toBe(false);
    renewing.open();
    await keeper.close();
  });
});

describe("releasing a lease while a renewal hangs", () => {
  it("does not wait for the renewal's answer: the lease is released and close returns", async () => {
    const { store, realRenew, keeper } = await keeperOf(3_000);
    let isHanging = false;
    store.renew = (...args) => {
      if (isHanging) return realRenew(...args);
      isHanging = true;
      // Never reaches the server and never answers, as on a link that went silent.
      return new Promise(() => {});
    };
    await keeper.acquire("host", "host-a");
    await waitFor(() => isHanging, 60_000);
    await keeper.close();
    expect((await store.read("host", "host-a"))?.record.released).toBe(true);
  });
});

describe("a lease taken again while its last renewal is still out", () => {
  it("retires the old epoch's fence, and that renewal's late conflict does not report the new lease lost", async () => {
    const { store, realRenew, lost, keeper } = await keeperOf(3_000);
    const late = gate();
    let isHeldBack = false;
    store.renew = async (...args) => {
      if (isHeldBack) return realRenew(...args);
      isHeldBack = true;
      // Held until the lease is taken again: it then names a revision that is gone.
      await late.opened;
      return realRenew(...args);
    };
    const old = await keeper.acquire("host", "host-a");
    await waitFor(() => isHeldBack, 10_000);
    const renewed = await keeper.acquire("host", "host-a");
    expect(renewed.epoch).toBe(old.epoch + 1);
    expect(() => old.assertHeld()).toThrow(/taken again under a new epoch/);

    const revision = await revisionOf(store);
    late.open();
    // The new lease goes on being renewed, and nothing was reported lost.
    await revisionPast(store, revision);
    expect(lost).toEqual([]);
    expect(() => renewed.assertHeld()).not.toThrow();
    await keeper.close();
  });
});
