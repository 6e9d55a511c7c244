import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { publishDurably } from "../../src/context/durable-publish.js";
import { NatsHistoryStore } from "../../src/context/nats-history-store.js";
import { UnavailableError } from "../../src/errors/unavailable-error.js";
import { startHost } from "../../src/host/start-host.js";
import { KvChatJournal } from "../../src/journal/kv-chat-journal.js";
import { ScriptedBackend } from "../../src/testing/index.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type RestartableNatsServer, startRestartableNatsServer } from "../support/nats-server.js";

/**
 * A 1.5 s nats-server restart failed most in-flight chats under `--history nats` with a
 * bare `internal: timeout`. JetStream writes now outlast a short outage and recognise their own
 * record when its acknowledgement was lost; a long one fails `unavailable` (retryable).
 */

const DOWN_MS = 1_500;

let cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  cleanups = [];
});

async function restartableServer(): Promise<RestartableNatsServer> {
  const server = await startRestartableNatsServer();
  cleanups.push(() => server.stop());
  cleanups.push(() => server.kill());
  return server;
}

async function reconnecting(url: string): Promise<NatsConnection> {
  const connection = await connect({ servers: url, maxReconnectAttempts: -1, reconnectTimeWait: 100 });
  cleanups.push(() => connection.close());
  return connection;
}

/**
 * Freezes the server, so the writes sent now are in flight, then kills it after a moment and brings
 * it back {@link DOWN_MS} later; resolves once it is back.
 */
async function bounce(server: RestartableNatsServer): Promise<void> {
  server.freeze();
  await new Promise((resolve) => setTimeout(resolve, 200));
  await server.kill();
  await new Promise((resolve) => setTimeout(resolve, DOWN_MS));
  await server.restart();
}

describe("JetStream writes across a nats-server restart", () => {
  it("stores a history append and a journal record issued while the server is down, each once", async () => {
    const server = await restartableServer();
    const connection = await reconnecting(server.url);
    const prefix = uniqueRoot();
    const store = await NatsHistoryStore.open(connection, { prefix });
    const history = store.history("bot", "s1");
    await history.restore();
    await history.append([{ role: "user", content: "before" }]);
    const journal = await KvChatJournal.open(connection, { bucket: `${prefix.toUpperCase()}_JOURNAL` });

    await server.kill();
    const writes = Promise.all([
      history.append([{ role: "assistant", content: "during" }]),
      journal.append("bot", "s1", { n: 1, id: "r1", steps: [{ kind: "take", ids: [] }] }),
    ]);
    await new Promise((resolve) => setTimeout(resolve, DOWN_MS));
    await server.restart();
    await writes;

    expect(await store.history("bot", "s1").restore()).toEqual([
      { role: "user", content: "before" },
      { role: "assistant", content: "during" },
    ]);
    expect((await journal.readRecords("bot", "s1")).map((record) => record.n)).toEqual([1]);
  }, 30_000);

  it("recognises its own record when a retry is refused because the first attempt was stored", async () => {
    const server = await restartableServer();
    const connection = await reconnecting(server.url);
    const jsm = await jetstreamManager(connection);
    // A duplicate window the retry falls outside, as after a long wait for the ack.
    await jsm.streams.add({ name: "OWN", subjects: ["own.>"], duplicate_window: 100_000_000 });
    const js = jetstream(connection);
    const first = await js.publish("own.a", "x", { msgID: "m1", expect: { lastSubjectSequence: 0 } });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const publish = { js, jsm, stream: "OWN", subject: "own.a", data: new Uint8Array([120]) };
    expect(await publishDurably({ ...publish, msgId: "m1", expectedLastSubjectSeq: 0 })).toBe(first.seq);
    // Another writer's record under the expectation is a conflict, not ours.
    await expect(
      publishDurably({ ...publish, msgId: "m2", expectedLastSubjectSeq: 0 }),
    ).rejects.toMatchObject({
      code: 10071,
    });
    expect((await jsm.streams.info("OWN")).state.messages).toBe(1);
  }, 30_000);

  it("fails `unavailable` (retryable) when the server stays away past the deadline", async () => {
    const server = await restartableServer();
    const connection = await reconnecting(server.url);
    const js = jetstream(connection);
    const jsm = await jetstreamManager(connection);
    await jsm.streams.add({ name: "GONE", subjects: ["gone.>"] });
    await server.kill();
    const failure = await publishDurably(
      { js, jsm, stream: "GONE", subject: "gone.a", data: new Uint8Array(), msgId: "m1" },
      { deadlineMs: 600, attemptTimeoutMs: 200 },
    ).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(UnavailableError);
    expect(failure).toMatchObject({ code: "unavailable", retryable: true });
  }, 30_000);

  it("finishes a chat of three tool steps across a 1.5 s restart under the JetStream history", async () => {
    const server = await restartableServer();
    const bus = await NatsBus.connect({ url: server.url, name: "outage-test" });
    cleanups.push(() => bus.close());
    const prefix = uniqueRoot();
    let bounced: Promise<void> | undefined;
    const step = defineTool({
      name: "step",
      description: "One step; the last takes NATS down for a moment.",
      parameters: z.object({ n: z.number() }),
      execute: async (args) => {
        // The step's history and journal writes go out to a frozen server, which then dies.
        if (args.n === 3) bounced ??= bounce(server);
        return `step ${args.n} done`;
      },
    });
    const backend = new ScriptedBackend([
      { toolCalls: [{ name: "step", arguments: { n: 1 } }] },
      { toolCalls: [{ name: "step", arguments: { n: 2 } }] },
      { toolCalls: [{ name: "step", arguments: { n: 3 } }] },
      { text: "all three done" },
    ]);
    const host = await startHost({
      bus,
      prefix,
      hostId: "h1",
      history: "nats",
      agents: [{ name: "bot", backend, tools: [step] }],
    });
    cleanups.push(() => host.close());
    const reply = await bus.request(
      chatSubject(prefix, "bot"),
      JSON.stringify({ session: "s1", text: "go", id: "r1" }),
      {
        timeoutMs: 40_000,
      },
    );
    expect(bounced).toBeDefined();
    expect(JSON.parse(reply.data)).toMatchObject({ ok: true, result: "all three done" });
    // Every step is in the shared history once.
    const store = await NatsHistoryStore.open(bus.connection, { prefix });
    const stored = await store.history("bot", "s1").restore();
    expect(stored.filter((message) => message.role === "tool").map((message) => message.content)).toEqual([
      "step 1 done",
      "step 2 done",
      "step 3 done",
    ]);
  }, 60_000);
});
