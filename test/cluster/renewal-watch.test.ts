import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { LeaseKeeper } from "../../src/cluster/lease-keeper.js";
import { RenewalWatch } from "../../src/cluster/renewal-watch.js";
import { leaseTiming, SessionLeaseStore } from "../../src/cluster/session-lease.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "renewal-watch-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

describe("a host lease's renewal notices", () => {
  it("say how long ago the lease was last renewed, how many renewals failed since and the slowest answer", () => {
    let now = 1_000;
    const watch = new RenewalWatch(() => now);
    now += 2_000;
    watch.renewed(40, true);
    now += 3_300;
    watch.renewed(3_300, false);
    now += 500;
    watch.renewed(1_200, false);
    expect(watch.describe()).toMatch(
      /^last renewed 3\.8 s ago; since then 2 renewals failed, the slowest answer 3300 ms; event loop delay max \d+ ms, p99 \d+ ms; CPU used \d+ ms$/,
    );
    // A renewal that gets through starts the account again.
    watch.renewed(15, true);
    expect(watch.describe()).toMatch(
      /^last renewed 0\.0 s ago; since then 0 renewals failed, the slowest answer 0 ms;/,
    );
    watch.close();
  });

  it("are fed by the lease keeper with each renewal's time from send to answer, failed ones too", async () => {
    const prefix = uniqueRoot();
    const store = await SessionLeaseStore.open(bus.connection, { prefix, timing: leaseTiming(900) });
    const renewals: { tookMs: number; isRenewed: boolean }[] = [];
    const keeper = new LeaseKeeper({
      store,
      hostId: "host-a",
      subject: `${prefix}.hosts.host-a`,
      onLost: () => {},
      onRenewal: (tookMs, isRenewed) => renewals.push({ tookMs, isRenewed }),
    });
    await keeper.acquire("host", "host-a");
    await waitFor(() => renewals.some((renewal) => renewal.isRenewed), 60_000);
    expect(renewals[0]?.tookMs).toBeGreaterThanOrEqual(0);
    // The server refuses the next renewals (as a restarting one does): each is told as failed.
    store.renew = () => Promise.reject(new Error("no responders"));
    await waitFor(() => renewals.some((renewal) => !renewal.isRenewed), 60_000);
    await keeper.close();
  });
});
