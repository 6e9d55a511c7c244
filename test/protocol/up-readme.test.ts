import { createInbox, type Msg } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { StreamChunk } from "../../src/protocol/stream-chunks.js";
import { Heartbeat } from "../../src/protocol/wire.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { type RunningUp, startUp } from "../ui/support/running-up.js";

/**
 * The README's three `nats` CLI lines (discover, prompt, heartbeats) against the built
 * `agentloop up` on NATS, done with the NATS client the way the CLI does them. The owner is
 * unique here only because other suites share the server; the README uses the default.
 */

let server: NatsServer;
let bus: NatsBus;
let up: RunningUp;
const owner = `o${uniqueRoot()}`;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "protocol-readme" });
  up = await startUp(
    ["--port", "0", "--nats", server.url, "--prefix", uniqueRoot(), "--owner", owner, "--heartbeat", "500ms"],
    { env: {} },
  );
});

afterAll(async () => {
  const run = await up?.stop();
  expect(run?.code).toBe(0);
  await bus?.close();
  await server?.stop();
});

interface Info {
  metadata: Record<string, string>;
  endpoints: { name: string; subject: string }[];
}

describe("README: the nats CLI lines against agentloop up", () => {
  it("nats req '$SRV.INFO.agents' '' --replies=0 lists the agent", async () => {
    let found:
      | { metadata: Record<string, string>; endpoints: { name: string; subject: string }[] }
      | undefined;
    // `up` prints its URL before every registration is certain to be visible: ask until it is.
    for (let attempt = 0; attempt < 20 && found === undefined; attempt++) {
      const replies = await bus.connection.requestMany("$SRV.INFO.agents", "", { maxWait: 500 });
      for await (const reply of replies) {
        const info = reply.json<Info>();
        if (info.metadata?.owner === owner) found = info;
      }
    }
    expect(found?.metadata).toMatchObject({ agent: "assistant", owner, protocol_version: "0.3" });
    expect(found?.endpoints.find((endpoint) => endpoint.name === "prompt")?.subject).toBe(
      `agents.prompt.assistant.${owner}.default`,
    );
  });

  it('nats req agents.prompt.assistant.<owner>.default "hello" --wait-for-empty streams the answer', async () => {
    const inbox = createInbox();
    const subscription = bus.connection.subscribe(inbox, { timeout: 30_000 });
    bus.connection.publish(`agents.prompt.assistant.${owner}.default`, "hello", { reply: inbox });
    const messages: Msg[] = [];
    for await (const message of subscription) {
      if (message.data.length === 0) break;
      messages.push(message);
    }
    subscription.unsubscribe();
    const chunks = messages.map((message) => StreamChunk.parse(message.json()));
    expect(chunks[0]).toEqual({ type: "status", data: "ack" });
    const text = chunks.flatMap((chunk) => (chunk.type === "response" ? [String(chunk.data)] : [])).join("");
    expect(text).toMatch(/^\[demo\] /);
  });

  it("nats sub 'agents.hb.*.*.*' shows the heartbeats", async () => {
    const beats = record(bus, "agents.hb.*.*.*");
    await expect
      .poll(
        () =>
          beats.messages
            .map((message) => Heartbeat.parse(JSON.parse(message.data)))
            .filter((heartbeat) => heartbeat.owner === owner).length,
        { timeout: 10_000 },
      )
      .toBeGreaterThan(0);
    beats.unsubscribe();
  });
});
