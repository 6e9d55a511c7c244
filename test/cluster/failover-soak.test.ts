import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { KILL_POINTS, runFailoverSoak } from "../../bench/soak/failover-soak.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { acquireNatsServer, type NatsServer } from "../support/nats-server.js";

/**
 * Issue 11, the bounded failover soak (the full one is `npm run soak`): three `serve --history
 * nats --lease-ttl 2s` processes (dist/), the session's owner killed with SIGKILL mid-stream,
 * mid-tool and with messages queued, every id retried until answered.
 */

let server: NatsServer;

beforeAll(async () => {
  server = await acquireNatsServer(inject("natsUrl"));
});

afterAll(async () => {
  await server.stop();
});

describe("the failover soak, bounded", () => {
  it(
    "each id gets its one result, histories have no dangling tool call, no side effect twice, the next owner serves in time",
    { timeout: 300_000 },
    async () => {
      const report = await runFailoverSoak({ runs: 6, seed: 11, natsUrl: server.url, prefix: uniqueRoot() });

      expect(report.violations).toEqual([]);
      // Every kill point was exercised and each kill was followed by a takeover.
      for (const point of KILL_POINTS) expect(report.kills[point]).toBeGreaterThanOrEqual(1);
      const kills = KILL_POINTS.reduce((sum, point) => sum + report.kills[point], 0);
      expect(report.failoverMs).toHaveLength(kills);
      expect(report.answered).toBe(report.requests);
      expect(report.resumed).toBeGreaterThanOrEqual(1);
    },
  );
});
