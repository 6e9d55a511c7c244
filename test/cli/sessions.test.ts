import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatSession, liveSessions } from "../../src/cli/commands/sessions.js";
import { leaseKey, type StoredLease } from "../../src/cluster/session-lease.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { linesOf, runCli } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

let server: NatsServer;

beforeAll(async () => {
  server = await workerNatsServer();
});

afterAll(async () => {
  await server.stop();
});

function lease(session: string, record: Partial<StoredLease["record"]>): StoredLease {
  return {
    key: leaseKey("bot", session),
    agent: "bot",
    session,
    revision: 1,
    record: {
      host: "h1",
      epoch: 2,
      acquiredAt: 1_000,
      renewedAt: 5_000,
      expiresAt: 15_000,
      ttlMs: 10_000,
      ...record,
    },
  };
}

describe("agentloop sessions", () => {
  it("lists only live leases: owner, state, epoch, how long held, when it expires", () => {
    const listings = liveSessions(
      [
        lease("live", { state: "busy" }),
        lease("expired", { expiresAt: 9_000 }),
        lease("released", { released: true }),
      ],
      10_000,
    );
    expect(listings).toEqual([
      {
        agent: "bot",
        session: "live",
        host: "h1",
        state: "busy",
        epoch: 2,
        heldMs: 9_000,
        expiresInMs: 5_000,
      },
    ]);
    expect(formatSession(listings[0]!)).toBe("bot/live  host h1  busy  epoch 2  held 9s  expires in 5s");
  });

  it("says so when no session is live", async () => {
    const prefix = uniqueRoot();
    const run = await runCli(["sessions", "--nats", server.url, "--prefix", prefix]);
    expect(run).toEqual({ code: 0, stdout: `no live sessions on ${server.url}\n`, stderr: "" });
  });

  it("fails with one line when NATS is unreachable", async () => {
    const run = await runCli(["sessions", "--nats", "nats://127.0.0.1:1"]);
    expect(run.code).toBe(1);
    expect(linesOf(run.stderr)).toEqual([
      expect.stringMatching(/^agentloop sessions: cannot reach NATS at nats:\/\/127\.0\.0\.1:1: /),
    ]);
  });

  it.each([
    [["--lease-ttl", "5"], '--lease-ttl must be a duration such as 90s, 30m or 12h, got "5"'],
    [["--lease-ttl", "100ms"], '--lease-ttl must be between 300ms and 1h, got "100ms"'],
    [["--dedupe-window", "30d"], '--dedupe-window must be between 1s and 7d, got "30d"'],
    [
      ["--resume-rate", "0"],
      '--resume-rate must be a whole number of sessions per second from 1 to 10000, got "0"',
    ],
    [
      ["--host-id", "a.b"],
      '--host-id must be one subject token of letters, digits, _ and - (at most 128), got "a.b"',
    ],
  ])("serve refuses %j before connecting (exit 2)", async (flags, message) => {
    const run = await runCli(["serve", "--nats", "nats://127.0.0.1:1", ...flags]);
    expect(run).toEqual({ code: 2, stdout: "", stderr: `agentloop: ${message}\n` });
  });
});
