import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { AgentHost } from "../../src/host/agent-host.js";
import { ContractService } from "../../src/host/contract-service.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { FakeAgent } from "./fake-agent.js";

/** Our own contract as the `agentloop` micro service (src/host/contract-service.ts). */

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "contract-service-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

async function startHost(
  prefix: string,
  log: (line: string) => void,
  statsData?: () => Record<string, unknown>,
) {
  const contract = await ContractService.start(bus, {
    prefix,
    log,
    ...(statsData === undefined ? {} : { statsData }),
  });
  const host = new AgentHost({
    bus,
    prefix,
    agents: ["bot"],
    createAgent: async (agent, session) => new FakeAgent({ name: agent, session }),
    listen: contract.listen,
  }).start();
  return { contract, host };
}

describe("ContractService", () => {
  it("answers with the contract's JSON, no headers, and counts requests and errors", async () => {
    const prefix = uniqueRoot();
    const { contract, host } = await startHost(prefix, () => {});
    const ok = await bus.request(chatSubject(prefix, "bot"), JSON.stringify({ session: "s", text: "hi" }));
    expect(ok.data).toBe(
      JSON.stringify({
        ok: true,
        session: "s",
        result: "echo: hi",
        usage: { prompt: 3, completion: 2, total: 5, cached: 0 },
      }),
    );
    expect(ok.headers).toBeUndefined();
    const bad = await bus.request(chatSubject(prefix, "bot"), "not json");
    expect(JSON.parse(bad.data)).toEqual({
      ok: false,
      error: { code: "bad_request", message: "chat request is not valid JSON" },
    });
    const stats = await contract.service.stats();
    const chat = stats.endpoints?.find((endpoint) => endpoint.name === "chat");
    expect(chat).toMatchObject({ num_requests: 2, queue_group: `${prefix}_host` });
    expect(chat?.data).toMatchObject({
      replies: {
        num_requests: 2,
        num_errors: 1,
        last_error: "bad_request: chat request is not valid JSON",
      },
    });
    expect(
      (chat?.data as { replies: { processing_time: number } }).replies.processing_time,
    ).toBeGreaterThanOrEqual(0);
    await host.close();
    expect(contract.service.isStopped).toBe(true);
  });

  it("shows the host's counters (lost events) as each endpoint's data in $SRV.STATS", async () => {
    const prefix = uniqueRoot();
    let lost = 0;
    const { contract, host } = await startHost(
      prefix,
      () => {},
      () => ({ eventPublishFailures: lost }),
    );
    lost = 3;
    const reply = await bus.request(`$SRV.STATS.agentloop.${contract.service.info().id}`, "");
    const endpoints = (JSON.parse(reply.data) as { endpoints: Array<{ name: string; data?: unknown }> })
      .endpoints;
    expect(endpoints.map((endpoint) => endpoint.name).sort()).toEqual(["chat", "control"]);
    for (const endpoint of endpoints) {
      expect(endpoint.data).toEqual({
        eventPublishFailures: 3,
        replies: { num_requests: 0, num_errors: 0, processing_time: 0, average_processing_time: 0 },
      });
    }
    await host.close();
  });

  it("goes on answering on plain subscriptions when the service stops on an error, and says so", async () => {
    const prefix = uniqueRoot();
    const lines: string[] = [];
    const { contract, host } = await startHost(prefix, (line) => lines.push(line));
    await contract.service.stop(new Error("required subscription $SRV.PING errored: Permissions Violation"));
    await expect.poll(() => lines.length).toBe(1);
    expect(lines[0]).toMatch(
      /^the agentloop micro service stopped \(required subscription .*\); chat and control go on/,
    );
    const reply = await bus.request(
      chatSubject(prefix, "bot"),
      JSON.stringify({ session: "s", text: "still?" }),
    );
    expect(JSON.parse(reply.data)).toMatchObject({ ok: true, result: "echo: still?" });
    await host.close();
  });

  it("stops quietly, as often as asked, when its bus was closed first (a shutdown race)", async () => {
    const own = await NatsBus.connect({ url: server.url, name: "contract-service-closed-bus" });
    const lines: string[] = [];
    const contract = await ContractService.start(own, {
      prefix: uniqueRoot(),
      log: (line) => lines.push(line),
    });
    const endpoint = contract.listen(
      "chat",
      `${uniqueRoot()}.agents.*.chat`,
      "q",
      async () => ({ ok: true }) as never,
    );
    const rejections: unknown[] = [];
    const onRejection = (reason: unknown) => rejections.push(reason);
    process.on("unhandledRejection", onRejection);
    try {
      await own.close();
      endpoint.unsubscribe();
      await expect(contract.stop()).resolves.toBeUndefined();
      await expect(contract.stop()).resolves.toBeUndefined();
      // An unhandled rejection surfaces on a later turn of the event loop.
      await new Promise((resolve) => setTimeout(resolve, 50));
    } finally {
      process.off("unhandledRejection", onRejection);
    }
    expect(rejections).toEqual([]);
    // Closing is no failure of the service: no fallback line, no plain subscriptions on a closed bus.
    expect(lines).toEqual([]);
  });
});
