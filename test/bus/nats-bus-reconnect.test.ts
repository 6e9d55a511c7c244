import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BusMessage } from "../../src/bus/bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { waitFor } from "../support/cli.js";
import { type RestartableNatsServer, startRestartableNatsServer } from "../support/nats-server.js";
import { record } from "./bus-helpers.js";

/**
 * What is published while NATS reconnects must not be lost. The v3 client
 * empties its outbound buffer at every reconnect attempt, so before the fix 0 of 10 publishes
 * made during an outage arrived, and a reply sent during it never reached its requester.
 */

let server: RestartableNatsServer;
const closers: (() => Promise<unknown>)[] = [];

beforeEach(async () => {
  server = await startRestartableNatsServer();
});

afterEach(async () => {
  await Promise.allSettled(closers.splice(0).map((close) => close()));
  await server.stop();
});

/** A bus whose notices are collected in `lines`. */
async function openBus(
  options: { maxHeldMessages?: number } = {},
): Promise<{ bus: NatsBus; lines: string[] }> {
  const lines: string[] = [];
  const bus = await NatsBus.connect({ url: server.url, log: (line) => lines.push(line), ...options });
  closers.push(() => bus.close());
  return { bus, lines };
}

/** Resolves once the client behind `connection` has seen the server go (its own status stream). */
function disconnected(connection: NatsConnection): Promise<void> {
  return new Promise((resolve) => {
    void (async () => {
      for await (const status of connection.status()) {
        if (status.type === "disconnect") break;
      }
      resolve();
    })();
  });
}

describe("NatsBus across a nats-server restart", () => {
  it("holds what is published while NATS is down and sends it, in order, once it is back", async () => {
    const { bus, lines } = await openBus();
    // The same connection subscribes: it resubscribes before anything it sends after a reconnect.
    const inbox = record(bus, "held.>");
    await bus.flush();
    const gone = disconnected(bus.connection);
    await server.kill();
    await gone;
    for (let index = 0; index < 10; index++) bus.publish(`held.${index}`, `message ${index}`);
    expect(bus.heldPublishes).toBe(10);
    await server.restart();
    const messages = await inbox.waitFor(10, 60_000);
    expect(messages.map((message) => message.data)).toEqual(
      Array.from({ length: 10 }, (_, index) => `message ${index}`),
    );
    expect(bus.droppedPublishes).toBe(0);
    expect(lines).toEqual([
      expect.stringMatching(/^lost the NATS connection to 127\.0\.0\.1:\d+; holding replies and events/),
      expect.stringMatching(/^reconnected to NATS at 127\.0\.0\.1:\d+; sent 10 held messages$/),
    ]);
  });

  it("holds bytes published while NATS is down with the rest, in order", async () => {
    const { bus } = await openBus();
    const inbox = record(bus, "held.>");
    await bus.flush();
    const gone = disconnected(bus.connection);
    await server.kill();
    await gone;
    for (let index = 0; index < 10; index++) {
      if (index % 2 === 0) bus.publish(`held.${index}`, `message ${index} ✓`);
      else bus.publishBytes(`held.${index}`, Buffer.from(`message ${index} ✓`, "utf8"));
    }
    expect(bus.heldPublishes).toBe(10);
    await server.restart();
    const messages = await inbox.waitFor(10, 60_000);
    expect(messages.map((message) => message.data)).toEqual(
      Array.from({ length: 10 }, (_, index) => `message ${index} ✓`),
    );
    expect(bus.droppedPublishes).toBe(0);
  });

  it("gets a reply sent during the outage to a requester that reconnects after the host", async () => {
    const { bus: host } = await openBus();
    const requests: BusMessage[] = [];
    host.subscribe("service.ask", (message) => requests.push(message));
    await host.flush();
    // Another client, slower to reconnect than the host: it is not back when the host sends.
    const client = await connect({ servers: server.url, reconnectTimeWait: 4_000, maxReconnectAttempts: -1 });
    closers.push(() => client.close());
    const reply = client.request("service.ask", "question", { timeout: 30_000 });
    await waitFor(() => requests.length === 1);
    const gone = disconnected(host.connection);
    await server.kill();
    await gone;
    host.respond(requests[0]!, "the answer");
    await server.restart();
    expect((await reply).string()).toBe("the answer");
    expect(host.droppedPublishes).toBe(0);
  }, 60_000);

  it("sends a request made while NATS is down once it is back, and gets it answered", async () => {
    const { bus: host } = await openBus();
    host.subscribe("service.echo", (message) => host.respond(message, `echo ${message.data}`));
    await host.flush();
    const { bus: client } = await openBus();
    const gone = disconnected(client.connection);
    await server.kill();
    await gone;
    const reply = client.request("service.echo", "hello", { timeoutMs: 30_000 });
    await server.restart();
    expect((await reply).data).toBe("echo hello");
  }, 60_000);

  it("holds at most maxHeldMessages events: the rest are dropped, counted and logged", async () => {
    const { bus, lines } = await openBus({ maxHeldMessages: 3 });
    const inbox = record(bus, "bounded.>");
    await bus.flush();
    const gone = disconnected(bus.connection);
    await server.kill();
    await gone;
    for (let index = 0; index < 5; index++) bus.publish(`bounded.${index}`, `message ${index}`);
    expect(bus.heldPublishes).toBe(3);
    expect(bus.droppedPublishes).toBe(2);
    await server.restart();
    await inbox.waitFor(3, 60_000);
    await bus.flush();
    expect(inbox.messages.map((message) => message.data)).toEqual(["message 0", "message 1", "message 2"]);
    expect(lines.slice(1)).toEqual([
      "the hold buffer is full (3 messages / 64 MiB): events are dropped until NATS is back",
      expect.stringMatching(
        /^reconnected to NATS at .+; sent 3 held messages; 2 more were dropped \(the hold buffer was full\)$/,
      ),
    ]);
  });

  it("closes without waiting for a server that is not there, and says what it could not send", async () => {
    const { bus, lines } = await openBus();
    const gone = disconnected(bus.connection);
    await server.kill();
    await gone;
    bus.publish("never.sent", "lost");
    await bus.flush();
    await bus.close();
    expect(bus.connection.isClosed()).toBe(true);
    expect(bus.droppedPublishes).toBe(1);
    expect(lines.at(-1)).toBe("closing while NATS is unreachable: 1 held message could not be sent");
  });
});
