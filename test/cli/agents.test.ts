import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeProtocolAgent, startFakeProtocolAgent } from "../protocol/fake-protocol-agent.js";
import { linesOf, runBinary, runCli, stackLines } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

describe("agentloop agents", () => {
  let server: NatsServer;
  let live: FakeProtocolAgent;
  let stopped: FakeProtocolAgent;
  /** Only this suite's agents carry this owner (the server is shared with other suites). */
  const owner = `o-${randomUUID().slice(0, 8)}`;

  beforeAll(async () => {
    server = await workerNatsServer();
    live = await startFakeProtocolAgent({ url: server.url, agent: "otherbot", owner, name: "live" });
    stopped = await startFakeProtocolAgent({ url: server.url, agent: "otherbot", owner, name: "stopped" });
    // It still answers discovery, but its heartbeats stop before the listing starts watching.
    stopped.stopHeartbeats();
  });
  afterAll(async () => {
    await live.close();
    await stopped.close();
    await server.stop();
  });

  it("lists every protocol agent with its endpoints and online state from heartbeats", async () => {
    const run = await runBinary(["agents", "--nats", server.url, "--timeout", "3s"], { timeoutMs: 30_000 });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const ours = linesOf(run.stdout).filter((line) => line.includes(`/${owner}/`));
    expect(ours).toHaveLength(2);
    expect(ours[0]).toMatch(
      new RegExp(
        `^otherbot/${owner}/live {2}online {2}protocol 0\\.3 {2}prompt=agents\\.prompt\\.otherbot\\.${owner}\\.live status=agents\\.status\\.otherbot\\.${owner}\\.live {2}heartbeat [\\d.]+s ago {2}id=${live.id}$`,
      ),
    );
    expect(ours[1]).toMatch(
      new RegExp(
        `^otherbot/${owner}/stopped {2}offline {2}protocol 0\\.3 .* no heartbeat {2}id=${stopped.id}$`,
      ),
    );
  });

  it("--json prints one JSON object per instance", async () => {
    const run = await runCli(["agents", "--nats", server.url, "--timeout", "3s", "--json"]);
    expect(run.code).toBe(0);
    const ours = linesOf(run.stdout)
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((listing) => listing.owner === owner);
    expect(ours).toEqual([
      {
        agent: "otherbot",
        owner,
        name: "live",
        instance_id: live.id,
        state: "online",
        protocol_version: "0.3",
        endpoints: [
          { name: "prompt", subject: live.promptSubject },
          { name: "status", subject: `agents.status.otherbot.${owner}.live` },
        ],
        last_heartbeat_s: expect.any(Number),
        interval_s: 1,
        discovered: true,
      },
      expect.objectContaining({
        name: "stopped",
        state: "offline",
        last_heartbeat_s: null,
        interval_s: null,
      }),
    ]);
  });

  it("fails with one line when NATS is unreachable or a flag is wrong", async () => {
    const unreachable = await runCli(["agents", "--nats", "nats://127.0.0.1:1"]);
    expect(unreachable.code).toBe(1);
    expect(linesOf(unreachable.stderr)).toHaveLength(1);
    expect(unreachable.stderr).toMatch(/^agentloop agents: cannot reach NATS at nats:\/\/127\.0\.0\.1:1: /);
    expect(stackLines(unreachable.stderr)).toEqual([]);
    const badTimeout = await runCli(["agents", "--timeout", "soon"]);
    expect(badTimeout.code).toBe(2);
    expect(badTimeout.stderr).toBe(
      'agentloop: --timeout must be a duration such as 90s, 30m or 12h, got "soon"\n',
    );
    const stray = await runCli(["agents", "extra"]);
    expect(stray.code).toBe(2);
  });
});
