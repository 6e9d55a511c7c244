import type { Msg } from "@nats-io/transport-node";
import { createInbox } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { AgentProtocolHost } from "../../src/protocol/agent-protocol-host.js";
import { protocolSubject } from "../../src/protocol/protocol-subjects.js";
import { StreamChunk } from "../../src/protocol/stream-chunks.js";
import { type HostFixture, SLOW, sleepText, startHostFixture } from "../host/host-fixture.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * The Agent Protocol door keeps the host's own limits: a prompt is a chat like one on our
 * contract, so the memory budget (`--max-memory-bytes`) refuses it the same way; `status` of a
 * session never used is a 404 (an in-process host on the worker's nats-server, a scripted model).
 */

let server: NatsServer;
let bus: NatsBus;
let fixture: HostFixture;
let protocol: AgentProtocolHost;
let checking: AgentProtocolHost;
const owner = "limits";
/** The same agents under another owner, asking every running chat whether its caller still waits. */
const checked = "liveness";

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "protocol-host-limits" });
  fixture = await startHostFixture(bus, { host: { maxMemoryBytes: 3_000 } });
  protocol = await AgentProtocolHost.start({
    connection: bus.connection,
    host: fixture.host,
    owner,
    sessionExists: () => false,
  });
  checking = await AgentProtocolHost.start({
    connection: bus.connection,
    host: fixture.host,
    owner: checked,
    livenessQueryMs: 150,
    livenessReplyMs: 400,
  });
});

afterAll(async () => {
  await protocol?.stop();
  await checking?.stop();
  await fixture?.close();
  await protocol?.drained();
  await checking?.drained();
  await bus?.close();
});

/** Every message of a prompt's stream, up to its terminator (an empty message without headers). */
async function promptStream(subject: string, payload: string): Promise<Msg[]> {
  const inbox = createInbox();
  const subscription = bus.connection.subscribe(inbox, { timeout: 20_000 });
  bus.connection.publish(subject, payload, { reply: inbox });
  const messages: Msg[] = [];
  for await (const message of subscription) {
    messages.push(message);
    if (message.data.length === 0 && message.headers === undefined) break;
  }
  subscription.unsubscribe();
  return messages;
}

function errorCodeOf(messages: Msg[]): string | undefined {
  return messages
    .find((message) => message.headers?.get("Nats-Service-Error-Code"))
    ?.headers?.get("Nats-Service-Error-Code");
}

describe("Agent Protocol host limits", () => {
  it("refuses a prompt with 429 while the sessions are over the memory budget and none is idle", async () => {
    const long = `first ${"x".repeat(1_000)}`;
    expect(await fixture.request("bot", "chat", { session: "s1", text: long })).toMatchObject({ ok: true });
    // s1 holds ~4 KB (over the 3,000-byte budget) and is busy, so it cannot be passivated.
    const busy = fixture.request("bot", "chat", { session: "s1", text: SLOW }, 30_000);
    await waitFor(() => fixture.host.sessions.find("bot", "s1")?.isIdle === false);
    const refused = await promptStream(protocolSubject("prompt", "bot", owner, "s2"), "hello");
    expect(errorCodeOf(refused)).toBe("429");
    const description = refused
      .find((message) => message.headers !== undefined)
      ?.headers?.get("Nats-Service-Error");
    expect(description).toContain("memory budget");
    expect(fixture.host.sessions.find("bot", "s2")).toBeUndefined();
    expect(await fixture.request("bot", "control", { session: "s1", command: "stop" })).toMatchObject({
      ok: true,
    });
    expect(await busy).toMatchObject({ ok: false });
  });

  it("answers status 404 for a session never used, and the heartbeat for a live one", async () => {
    const never = await bus.connection.request(protocolSubject("status", "bot", owner, "never-used"), "", {
      timeout: 5_000,
    });
    expect(never.headers?.get("Nats-Service-Error-Code")).toBe("404");
    expect(never.json()).toMatchObject({ code: "unknown_session" });
    expect(await fixture.request("bot", "chat", { session: "s3", text: "hi" })).toMatchObject({ ok: true });
    const live = await bus.connection.request(protocolSubject("status", "bot", owner, "s3"), "", {
      timeout: 5_000,
    });
    expect(live.headers).toBeUndefined();
    expect(live.json()).toMatchObject({ agent: "bot", session: "s3", interval_s: 5 });
  });
});

describe("Agent Protocol liveness queries (--liveness-query)", () => {
  it("a caller that answers the liveness question gets its whole answer", async () => {
    const inbox = createInbox();
    const subscription = bus.connection.subscribe(inbox, { timeout: 20_000 });
    bus.connection.publish(protocolSubject("prompt", "bot", checked, "alive"), sleepText(300), {
      reply: inbox,
    });
    const chunks: StreamChunk[] = [];
    for await (const message of subscription) {
      if (message.data.length === 0 && message.headers === undefined) break;
      expect(message.headers).toBeUndefined();
      const chunk = StreamChunk.parse(message.json());
      chunks.push(chunk);
      if (chunk.type === "query") bus.connection.publish(chunk.data.reply_subject, "still here");
    }
    subscription.unsubscribe();
    expect(chunks.some((chunk) => chunk.type === "query" && chunk.data.id.startsWith("liveness-"))).toBe(
      true,
    );
    const text = chunks.flatMap((chunk) => (chunk.type === "response" ? [chunk.data] : [])).join("");
    expect(text).toBe("woke");
  });

  it("stops the chat of a caller that cancelled on its connection's shared reply inbox", async () => {
    // The official clients' way: a sentinel request on the connection's mux inbox, stopped early.
    // The inbox keeps its subscriber, so only the unanswered question tells the host.
    const replies = await bus.connection.requestMany(
      protocolSubject("prompt", "bot", checked, "gone"),
      SLOW,
      {
        strategy: "sentinel",
        maxWait: 20_000,
      },
    );
    for await (const message of replies) {
      expect(StreamChunk.parse(message.json())).toEqual({ type: "status", data: "ack" });
      break;
    }
    await waitFor(() =>
      fixture.events.some(
        (entry) =>
          entry.event.kind === "ChatFailed" &&
          entry.event.session === "gone" &&
          entry.event.cancelled === true,
      ),
    );
    expect(fixture.host.sessions.find("bot", "gone")?.isIdle).toBe(true);
  });
});
