import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { startHost } from "../../src/host/start-host.js";
import { ConfigurationError } from "../../src/llm/configuration-error.js";
import { ScriptedBackend } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/** `startHost({ history: "nats", hostId })`: one session, two hosts in turn, one history. */

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "shared-history-host-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

describe("startHost with the JetStream history", () => {
  it("lets the next host continue a session where the last one left it, each stamping its events", async () => {
    const prefix = uniqueRoot();
    const events: AgentEvent[] = [];
    const backend = new ScriptedBackend((request) => ({ text: `reply ${request.messages.length}` }));
    const hostFor = (hostId: string) =>
      startHost({
        bus,
        prefix,
        hostId,
        history: "nats",
        agents: [{ name: "bot", backend }],
        onEvent: (event) => events.push(event),
      });
    const chat = async (text: string) => {
      const reply = await bus.request(chatSubject(prefix, "bot"), JSON.stringify({ session: "s1", text }), {
        timeoutMs: 15_000,
      });
      return JSON.parse(reply.data) as Record<string, unknown>;
    };

    const first = await hostFor("first");
    expect(await chat("one")).toMatchObject({ ok: true, result: "reply 2" });
    await first.close();
    const second = await hostFor("second");
    expect(await chat("two")).toMatchObject({ ok: true, result: "reply 4" });
    await second.close();

    expect(backend.requests[1]?.messages.slice(1)).toEqual([
      { role: "user", content: "one" },
      { role: "assistant", content: "reply 2" },
      { role: "user", content: "two" },
    ]);
    const completed = events.filter((event) => event.kind === "ChatCompleted");
    expect(completed.map((event) => [event.host, event.seq > 0])).toEqual([
      ["first", true],
      ["second", true],
    ]);
    // seq goes on above the first host's mark: the mark is in JetStream too.
    expect(completed[1]!.seq).toBeGreaterThan(completed[0]!.seq);
  });

  it("refuses the JetStream history on the in-process bus, and a host id that is not one token", async () => {
    const local = new LocalBus();
    await expect(startHost({ bus: local, history: "nats", agents: [{ name: "bot" }] })).rejects.toThrow(
      new ConfigurationError(
        "the JetStream history (--history nats) needs a NATS bus, not the in-process bus",
      ),
    );
    await expect(startHost({ bus: local, hostId: "a.b", agents: [{ name: "bot" }] })).rejects.toThrow(
      /^host id "a\.b" is not one subject token/,
    );
    await local.close();
  });
});
