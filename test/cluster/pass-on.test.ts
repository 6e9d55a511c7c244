import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { AgentRouting, servingSubject } from "../../src/cluster/agent-routing.js";
import { probe } from "../../src/cluster/pass-on.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "pass-on-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

describe("probing a subject before passing a request on", () => {
  it("tells an answer, no subscriber at all, and a subscriber that does not answer apart", async () => {
    const root = uniqueRoot();
    const answering = bus.connection.subscribe(`${root}.answering`, {
      callback: (_error, message) => {
        message.respond("{}");
      },
    });
    const silent = bus.connection.subscribe(`${root}.silent`, { callback: () => {} });
    await bus.flush();
    expect(await probe(bus.connection, `${root}.answering`, 2_000)).toBe("answered");
    expect(await probe(bus.connection, `${root}.nobody`, 2_000)).toBe("nobody");
    expect(await probe(bus.connection, `${root}.silent`, 200)).toBe("silent");
    answering.unsubscribe();
    silent.unsubscribe();
  });

  it("passes a request for another host's agent on when that host is too busy to answer the probe, refuses only when none serves it", async () => {
    const prefix = uniqueRoot();
    const routing = new AgentRouting(bus.connection, prefix);
    const received: string[] = [];
    // A host that serves "big" but answers nothing at once (its probe goes unanswered).
    const busy = bus.connection.subscribe(servingSubject(prefix, "big", "*"), {
      callback: (_error, message) => {
        if (message.string() !== "{}") received.push(message.string());
      },
    });
    await bus.flush();
    const request = {
      subject: `${prefix}.agents.big.chat`,
      data: '{"session":"s","text":"hi"}',
      headers: {},
    };
    expect(await routing.passOn("big", "chat", request)).toBe(true);
    expect(await routing.passOn("nobody", "chat", request)).toBe(false);
    await bus.flush();
    await expect.poll(() => received).toEqual(['{"session":"s","text":"hi"}']);
    busy.unsubscribe();
  });
});
