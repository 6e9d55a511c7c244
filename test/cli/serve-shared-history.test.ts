import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { historyStreamName, historySubject } from "../../src/context/nats-history-store.js";
import type { AgentEvent } from "../../src/events/types.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { killServeProcesses, startServeProcess, waitUntilServing } from "../host/running-serve.js";
import { type FakeProvider, startFakeProvider, textTurn } from "../support/cli.js";
import { type NatsServer, startNatsServer } from "../support/nats-server.js";

/**
 * Black-box: with `--history nats` a session's history lives in JetStream, not in the
 * host, so a host killed with SIGKILL loses nothing: another `serve` (another host id, no shared
 * file) continues the conversation, and the model sees the earlier turns.
 */

let server: NatsServer;
let bus: NatsBus;
let provider: FakeProvider;

beforeAll(async () => {
  server = await startNatsServer({ isPrivate: true });
  bus = await NatsBus.connect({ url: server.url, name: "serve-shared-history-test" });
});

afterEach(() => killServeProcesses());

afterAll(async () => {
  await provider?.close();
  await bus.close();
  await server.stop();
});

async function chat(prefix: string, session: string, text: string): Promise<Record<string, unknown>> {
  const reply = await bus.request(chatSubject(prefix, "assistant"), JSON.stringify({ session, text }), {
    timeoutMs: 30_000,
  });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

describe("serve --history nats", () => {
  it("continues a session on another host after the first one is killed", { timeout: 120_000 }, async () => {
    const prefix = uniqueRoot();
    provider = await startFakeProvider("openai-chat", [textTurn("Noted: 42."), textTurn("It was 42.")]);
    const common = ["--nats", server.url, "--prefix", prefix, "--history", "nats", ...provider.flags];
    const completed = record(bus, `${prefix}.events.assistant.s1.ChatCompleted`);
    await bus.flush();

    const first = startServeProcess([...common, "--host-id", "host-one"], provider.env);
    await waitUntilServing(bus, prefix, first);
    expect(await chat(prefix, "s1", "remember the number 42")).toMatchObject({
      ok: true,
      result: "Noted: 42.",
    });
    await completed.waitFor(1);
    first.child.kill("SIGKILL");
    expect((await first.run).code).toBe(128);

    const second = startServeProcess([...common, "--host-id", "host-two"], provider.env);
    await waitUntilServing(bus, prefix, second);
    expect(await chat(prefix, "s1", "what number?")).toMatchObject({ ok: true, result: "It was 42." });
    await completed.waitFor(2);

    // The second host's request holds the first host's turns.
    const messages = provider.bodies()[1]?.messages as Array<{ role: string; content: unknown }>;
    expect(messages.filter((message) => message.role !== "system")).toEqual([
      { role: "user", content: "remember the number 42" },
      { role: "assistant", content: "Noted: 42." },
      { role: "user", content: "what number?" },
    ]);
    const hosts = completed.messages.map((message) => (JSON.parse(message.data) as AgentEvent).host);
    expect(hosts).toEqual(["host-one", "host-two"]);

    // In the stream, not in a file: the subject holds the session's appends.
    const manager = await jetstreamManager(bus.connection);
    const subject = historySubject(prefix, "assistant", "s1");
    const info = await manager.streams.info(historyStreamName(prefix), { subjects_filter: subject });
    expect(info.state.subjects?.[subject]).toBeGreaterThanOrEqual(2);

    second.child.kill("SIGTERM");
    expect((await second.run).code).toBe(0);
  });
});
