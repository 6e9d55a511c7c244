import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, controlSubject } from "../../src/bus/subjects.js";
import { AgentRouting } from "../../src/cluster/agent-routing.js";
import { AgentHost } from "../../src/host/agent-host.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { FakeAgent } from "../host/fake-agent.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Hosts with different agents on one prefix share the queue group on `<prefix>.agents.*.*`: a
 * request that lands on a host without its agent is passed on to one that has it, and only a
 * request for an agent no host serves gets `unknown_agent`.
 */

let server: NatsServer;
let client: NatsBus;
const cleanups: (() => Promise<void>)[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
  client = await NatsBus.connect({ url: server.url, name: "agent-routing-test" });
});

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

afterAll(async () => {
  await client.close();
  await server.stop();
});

async function startHost(prefix: string, agents: string[], served: string[]): Promise<void> {
  const bus = await NatsBus.connect({ url: server.url, name: agents.join("+") });
  const host = new AgentHost({
    bus,
    prefix,
    agents,
    routing: new AgentRouting(bus.connection, prefix),
    createAgent: async (name, session) => {
      served.push(name);
      return new FakeAgent({ name, session });
    },
  }).start();
  await bus.flush();
  cleanups.push(async () => {
    await host.close({ graceMs: 0 });
    await bus.close();
  });
}

async function ask(subject: string, payload: unknown): Promise<{ ok: boolean; error?: { code: string } }> {
  return JSON.parse((await client.request(subject, JSON.stringify(payload), { timeoutMs: 15_000 })).data);
}

describe("hosts serving different agents on one prefix", () => {
  it("answer every request for an agent some host serves, chats and control verbs alike", async () => {
    const prefix = uniqueRoot();
    const byOps: string[] = [];
    const byBig: string[] = [];
    await startHost(prefix, ["ops"], byOps);
    await startHost(prefix, ["big", "shared"], byBig);
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, index) => [
        ask(chatSubject(prefix, "ops"), { session: `o${index}`, text: "hi" }),
        ask(chatSubject(prefix, "big"), { session: `b${index}`, text: "hi" }),
        ask(controlSubject(prefix, "big"), { session: `c${index}`, command: "new" }),
      ]).flat(),
    );
    expect(replies.filter((reply) => !reply.ok)).toEqual([]);
    expect(new Set(byOps)).toEqual(new Set(["ops"]));
    expect(new Set(byBig)).toEqual(new Set(["big"]));
  });

  it("answer unknown_agent for an agent no host serves, whichever host takes it", async () => {
    const prefix = uniqueRoot();
    await startHost(prefix, ["ops"], []);
    await startHost(prefix, ["big"], []);
    const replies = await Promise.all(
      Array.from({ length: 10 }, (_, index) =>
        ask(chatSubject(prefix, "nobody"), { session: `n${index}`, text: "hi" }),
      ),
    );
    for (const reply of replies) expect(reply).toMatchObject({ ok: false, error: { code: "unknown_agent" } });
  });
});

describe("a request whose bytes are not UTF-8", () => {
  it("is answered bad_request (not run on replacement characters), and the host goes on serving", async () => {
    const prefix = uniqueRoot();
    const served: string[] = [];
    await startHost(prefix, ["ops"], served);
    const invalid = [
      Buffer.from('{"session":"s1","text":"\xff"}', "latin1"),
      Buffer.concat([Buffer.from('{"session":"s1","text":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]),
      Buffer.from([0xff, 0xfe, 0x41]),
    ];
    for (const bytes of invalid) {
      const reply = JSON.parse((await client.connection.request(chatSubject(prefix, "ops"), bytes)).string());
      expect(reply).toMatchObject({
        ok: false,
        error: { code: "bad_request", message: expect.stringMatching(/UTF-8/) },
      });
    }
    expect(served).toEqual([]);
    expect(await ask(chatSubject(prefix, "ops"), { session: "s1", text: "é ok 😀" })).toMatchObject({
      ok: true,
    });
  });
});
