import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { createHostId, isValidHostId } from "../../src/config/host-id.js";
import type { AgentEvent } from "../../src/events/types.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { startServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, runCli, withoutLoadNotices } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/** Every host has an id (`--host-id`), logged at start, carried by every event as `host`. */

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "host-identity-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

describe("host identity", () => {
  it("generates a NATS-token-safe id that differs per call", () => {
    const first = createHostId();
    expect(isValidHostId(first)).toBe(true);
    expect(first).toMatch(new RegExp(`-${process.pid}-[0-9a-f]{6}$`));
    expect(createHostId()).not.toBe(first);
    for (const bad of ["", "a.b", "a b", "a*", "x".repeat(129), 42]) expect(isValidHostId(bad)).toBe(false);
  });

  it("refuses a bad --host-id or --history with one line, exit 2, before connecting", async () => {
    for (const [args, message] of [
      [["--host-id", "host.one"], /^agentloop: --host-id must be one subject token .* got "host\.one"\n$/],
      [["--host-id="], /^agentloop: --host-id needs a value\n$/],
      [["--history", "mongo"], /^agentloop: --history must be sqlite or nats, got "mongo"\n$/],
    ] as const) {
      for (const command of ["serve", "up"]) {
        const run = await runCli([command, "--nats", "nats://127.0.0.1:1", ...args]);
        expect(run.code).toBe(2);
        expect(run.stderr).toMatch(message);
        expect(run.stdout).toBe("");
      }
    }
  });

  it("serve logs its id, puts it in $SRV metadata, and every event of a chat carries it", async () => {
    const prefix = uniqueRoot();
    const serve = startServe(["--nats", server.url, "--prefix", prefix, "--host-id", "host-A_1"]);
    await waitUntilServing(bus, prefix, serve);
    const events = record(bus, `${prefix}.events.assistant.s1.>`);
    await bus.flush();
    const reply = await bus.request(
      chatSubject(prefix, "assistant"),
      JSON.stringify({ session: "s1", text: "hello" }),
      { timeoutMs: 15_000 },
    );
    expect(JSON.parse(reply.data)).toMatchObject({ ok: true });
    const seen = (await events.waitFor(1)).map((message) => JSON.parse(message.data) as AgentEvent);
    const info = await bus.connection.request("$SRV.INFO.agentloop", "", { timeout: 5_000 });
    const run = await serve.stop();

    expect(linesOf(run.stdout)).toEqual([expect.stringContaining(`(nats, prefix ${prefix}, host host-A_1)`)]);
    expect(JSON.parse(info.string()).metadata).toMatchObject({ prefix, host: "host-A_1" });
    expect(seen.length).toBeGreaterThan(0);
    for (const event of events.messages.map((message) => JSON.parse(message.data) as AgentEvent)) {
      expect(event.host).toBe("host-A_1");
    }
  });

  it("chat --local stamps its events with a host id of its own", async () => {
    const run = await runCli(["chat", "--local", "--events", "jsonl", "hello"]);
    expect(run.code).toBe(0);
    const lines = linesOf(run.stdout).map((line) => JSON.parse(line) as Record<string, unknown>);
    const events = lines.filter((line) => line.kind !== "Result");
    expect(events.length).toBeGreaterThan(3);
    const hosts = new Set(events.map((event) => event.host));
    expect(hosts.size).toBe(1);
    expect(isValidHostId([...hosts][0])).toBe(true);
  });

  it("up --history nats without a NATS server says so in one line and exits 1", async () => {
    const run = await runCli(["up", "--history", "nats", "--nats", "nats://127.0.0.1:1", "--port", "0"]);
    expect(run.code).toBe(1);
    expect(withoutLoadNotices(run.stderr)).toBe(
      "agentloop up: --history nats needs a NATS server with JetStream, and none answers at nats://127.0.0.1:1\n",
    );
  });
});
