import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Msg, NatsConnection } from "@nats-io/transport-node";
import { createInbox } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { StreamChunk } from "../../src/protocol/stream-chunks.js";
import { Heartbeat } from "../../src/protocol/wire.js";
import {
  chatTurnSse,
  cutAfterFrames,
  type FakeOpenAI,
  openAIError,
  stallAfterFrames,
  startFakeOpenAI,
} from "../../src/testing/index.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, startServe, waitUntilServing } from "../host/running-serve.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * The Synadia Agent Protocol v0.3 conformance suite, written from the protocol notes
 * (/work/shared/interop/nats-agent-protocol.md), against `agentloop serve` on a real nats-server
 * with a streaming fake model. Every request goes to the subject discovery returned.
 */

const STREAMED = ["The answer ", "is forty", "-two, ", "as computed."];

let server: NatsServer;
let bus: NatsBus;
let nc: NatsConnection;
let fake: FakeOpenAI;
let directory: string;
let serve: RunningServe;
const prefix = uniqueRoot();
const owner = `o${uniqueRoot()}`;
const isCut = new Set<string>();

/** The last user text of a chat request. */
function lastUserText(body: unknown): string {
  const messages = (body as { messages?: Array<{ role: string; content: unknown }> }).messages ?? [];
  const user = messages.filter((message) => message.role === "user").at(-1);
  return typeof user?.content === "string" ? user.content : JSON.stringify(user?.content ?? "");
}

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "protocol-conformance" });
  nc = bus.connection;
  fake = await startFakeOpenAI({
    chat: (request) => {
      const text = lastUserText(request.body);
      if (text.includes("hang")) return stallAfterFrames(chatTurnSse({ text: ["Thinking"] }), 1);
      if (text.includes("fail")) return openAIError(400, "the model refused this request");
      if (text.includes("cut") && !isCut.has(text)) {
        // The first attempt dies after its first delta: the client retries the stream.
        isCut.add(text);
        const broken = chatTurnSse({ text: ["Lost ", "text ", "never to be seen"] });
        if (broken.type !== "sse") throw new Error("expected a stream");
        const firstDelta = broken.frames.findIndex((frame) => frame.includes("Lost "));
        return cutAfterFrames(broken, firstDelta + 1);
      }
      return { type: "turn", text: STREAMED };
    },
  });
  directory = await mkdtemp(join(tmpdir(), "agentloop-protocol-"));
  const agents = join(directory, "agents.json");
  await writeFile(agents, JSON.stringify({ agents: [{ name: "writer" }, { name: "critic" }] }));
  serve = startServe(
    [
      "--nats",
      server.url,
      "--prefix",
      prefix,
      "--agents",
      agents,
      "--provider",
      "openai-chat",
      "--base-url",
      fake.baseUrl,
      "--owner",
      owner,
      "--heartbeat",
      "200ms",
      "--keep-alive",
      "200ms",
    ],
    { OPENAI_API_KEY: "test" },
  );
  await waitUntilServing(bus, prefix, serve, "writer");
});

afterAll(async () => {
  const run = await serve?.stop();
  expect(run?.code).toBe(0);
  await bus?.close();
  await fake?.close();
  await server?.stop();
  await rm(directory, { recursive: true, force: true });
});

interface Info {
  id: string;
  name: string;
  version: string;
  metadata: Record<string, string>;
  endpoints: Array<{
    name: string;
    subject: string;
    queue_group?: string;
    metadata?: Record<string, string>;
  }>;
}

/** Every service answering `$SRV.<verb>.<name>` (many replies, collected for a moment). */
async function collect<T>(subject: string): Promise<T[]> {
  const replies = await nc.requestMany(subject, "", { maxWait: 1_000 });
  const found: T[] = [];
  for await (const reply of replies) found.push(reply.json<T>());
  return found;
}

async function discover(): Promise<Info[]> {
  return (await collect<Info>("$SRV.INFO.agents")).filter((info) => info.metadata?.owner === owner);
}

async function promptSubjectOf(agent: string): Promise<string> {
  const info = (await discover()).find((candidate) => candidate.metadata.agent === agent);
  const endpoint = info?.endpoints.find((candidate) => candidate.name === "prompt");
  if (endpoint === undefined) throw new Error(`no prompt endpoint for ${agent}`);
  return endpoint.subject;
}

interface Streamed {
  messages: Msg[];
  /** The chunks before the terminator (error messages excluded). */
  chunks: StreamChunk[];
  terminator: Msg;
}

/** Prompts on `subject` and reads the stream until its terminator (an empty message without headers). */
async function prompt(
  subject: string,
  payload: string,
  onMessage?: (message: Msg) => void,
): Promise<Streamed> {
  const inbox = createInbox();
  const subscription = nc.subscribe(inbox, { timeout: 30_000 });
  nc.publish(subject, payload, { reply: inbox });
  const messages: Msg[] = [];
  for await (const message of subscription) {
    messages.push(message);
    onMessage?.(message);
    if (message.data.length === 0 && message.headers === undefined) break;
  }
  subscription.unsubscribe();
  const terminator = messages.at(-1)!;
  const chunks = messages
    .slice(0, -1)
    .filter((message) => message.headers === undefined)
    .map((message) => StreamChunk.parse(message.json()));
  return { messages, chunks, terminator };
}

function responseText(chunks: StreamChunk[]): string {
  return chunks
    .filter((chunk) => chunk.type === "response")
    .map((chunk) => (typeof chunk.data === "string" ? chunk.data : chunk.data.text))
    .join("");
}

function errorOf(streamed: Streamed): { code: string | undefined; description: string | undefined } {
  const error = streamed.messages.find((message) => message.headers?.get("Nats-Service-Error-Code"));
  return {
    code: error?.headers?.get("Nats-Service-Error-Code"),
    description: error?.headers?.get("Nats-Service-Error"),
  };
}

describe("Agent Protocol v0.3 conformance (agentloop serve)", () => {
  it("discovery finds each agent with the protocol's metadata and endpoints", async () => {
    const found = await discover();
    expect(found.map((info) => info.metadata.agent).sort()).toEqual(["critic", "writer"]);
    for (const info of found) {
      const agent = info.metadata.agent!;
      expect(info.name).toBe("agents");
      expect(info.metadata).toMatchObject({ agent, owner, protocol_version: "0.3", session: "default" });
      const byName = Object.fromEntries(info.endpoints.map((endpoint) => [endpoint.name, endpoint]));
      expect(byName.prompt).toMatchObject({
        subject: `agents.prompt.${agent}.${owner}.default`,
        queue_group: "agents",
        metadata: { max_payload: "1MB", attachments_ok: "false" },
      });
      expect(byName.status?.subject).toBe(`agents.status.${agent}.${owner}.default`);
      expect(byName["prompt-session"]?.subject).toBe(`agents.prompt.${agent}.${owner}.*`);
    }
    const pings = (
      await collect<{ id: string; metadata: Record<string, string> }>("$SRV.PING.agents")
    ).filter((ping) => ping.metadata?.owner === owner);
    expect(pings.map((ping) => ping.id).sort()).toEqual(found.map((info) => info.id).sort());
  });

  it("streams: ack first, response chunks joining to the chat's result, an empty terminator without headers", async () => {
    const subject = await promptSubjectOf("writer");
    const completed = record(bus, `${prefix}.events.writer.default.ChatCompleted`);
    await bus.flush();
    const streamed = await prompt(subject, "What is the answer?");
    expect(streamed.chunks[0]).toEqual({ type: "status", data: "ack" });
    expect(streamed.chunks.every((chunk) => chunk.type === "status" || chunk.type === "response")).toBe(true);
    const [event] = await completed.waitFor(1);
    const result = (JSON.parse(event!.data) as { result: string }).result;
    expect(result).toBe(STREAMED.join(""));
    expect(responseText(streamed.chunks)).toBe(result);
    expect(streamed.terminator.data.length).toBe(0);
    expect(streamed.terminator.headers).toBeUndefined();
    expect(errorOf(streamed).code).toBeUndefined();
    completed.unsubscribe();
  });

  it("takes the JSON envelope as well as plain text", async () => {
    const streamed = await prompt(
      await promptSubjectOf("critic"),
      JSON.stringify({ prompt: "Review this", extra: 1 }),
    );
    expect(responseText(streamed.chunks)).toBe(STREAMED.join(""));
  });

  it("tells a retried stream only after the retry succeeded: the lost attempt's text is never sent", async () => {
    const reset = record(bus, `${prefix}.events.writer.default.ModelStreamSegmentReset`);
    await bus.flush();
    const streamed = await prompt(await promptSubjectOf("writer"), "cut this stream once");
    await reset.waitFor(1);
    reset.unsubscribe();
    expect(responseText(streamed.chunks)).toBe(STREAMED.join(""));
    expect(JSON.stringify(streamed.chunks)).not.toContain("Lost");
  });

  it("reaches a named session through the 5th token", async () => {
    const started = record(bus, `${prefix}.events.writer.named-1.ChatStarted`);
    await bus.flush();
    const streamed = await prompt(`agents.prompt.writer.${owner}.named-1`, "Hello, named session");
    expect(responseText(streamed.chunks)).toBe(STREAMED.join(""));
    const [event] = await started.waitFor(1);
    expect(JSON.parse(event!.data)).toMatchObject({ session: "named-1", text: "Hello, named session" });
    started.unsubscribe();
  });

  it("answers 400 for an empty payload, a bad envelope and {-led text that is no JSON, then the terminator", async () => {
    const subject = await promptSubjectOf("writer");
    for (const payload of ["", "{not json", JSON.stringify({ prompt: 5 }), JSON.stringify({ prompt: "" })]) {
      const streamed = await prompt(subject, payload);
      expect(errorOf(streamed).code).toBe("400");
      expect(errorOf(streamed).description).toMatch(/empty payload|bad envelope|malformed JSON envelope/);
      expect(streamed.terminator.headers).toBeUndefined();
      expect(streamed.terminator.data.length).toBe(0);
    }
  });

  it("answers 404 for a session token that cannot name a session", async () => {
    const streamed = await prompt(`agents.prompt.writer.${owner}.no~such`, "hello");
    expect(errorOf(streamed)).toMatchObject({ code: "404", description: expect.stringContaining("no~such") });
    expect(streamed.terminator.headers).toBeUndefined();
  });

  it("answers 500 when the model fails, after the ack", async () => {
    const streamed = await prompt(await promptSubjectOf("writer"), "please fail");
    expect(streamed.chunks[0]).toEqual({ type: "status", data: "ack" });
    expect(errorOf(streamed)).toMatchObject({ code: "500", description: expect.stringContaining("refused") });
    expect(streamed.terminator.headers).toBeUndefined();
  });

  it("sends heartbeats every interval with the protocol's fields", async () => {
    const instance = (await discover()).find((info) => info.metadata.agent === "critic")!;
    const beats = record(bus, `agents.hb.critic.${owner}.*`);
    const received = await beats.waitFor(2, 60_000);
    beats.unsubscribe();
    for (const message of received) {
      expect(message.subject).toBe(`agents.hb.critic.${owner}.default`);
      const heartbeat = Heartbeat.parse(JSON.parse(message.data));
      expect(heartbeat).toMatchObject({
        agent: "critic",
        owner,
        session: "default",
        instance_id: instance.id,
        ts: expect.any(String),
        // Whole seconds, at least 1, whatever the period (200 ms here).
        interval_s: 1,
      });
      expect(Number.isNaN(Date.parse(String(heartbeat.ts)))).toBe(false);
    }
  });

  it("answers status with the heartbeat payload, for the default and a named session; 404 for one never used", async () => {
    const info = (await discover()).find((candidate) => candidate.metadata.agent === "writer")!;
    const status = info.endpoints.find((endpoint) => endpoint.name === "status")!;
    const reply = await nc.request(status.subject, "", { timeout: 5_000 });
    expect(Heartbeat.parse(reply.json())).toMatchObject({
      agent: "writer",
      owner,
      session: "default",
      instance_id: info.id,
    });
    const never = await nc.request(`agents.status.writer.${owner}.s9`, "", { timeout: 5_000 });
    expect(never.headers?.get("Nats-Service-Error-Code")).toBe("404");
    expect(never.headers?.get("Nats-Service-Error")).toContain("never used");
    await prompt(`agents.prompt.writer.${owner}.s9`, "Hello, s9");
    const named = await nc.request(`agents.status.writer.${owner}.s9`, "", { timeout: 5_000 });
    expect(Heartbeat.parse(named.json())).toMatchObject({ session: "s9" });
  });

  it("cancellation: a caller that unsubscribes stops the chat's model request", async () => {
    const subject = await promptSubjectOf("writer");
    const failed = record(bus, `${prefix}.events.writer.default.ChatFailed`);
    await bus.flush();
    const before = fake.requestsTo("chat").length;
    const inbox = createInbox();
    // The ack, then a keep-alive ack while the model request hangs; then the caller goes away.
    const subscription = nc.subscribe(inbox, { max: 2 });
    nc.publish(subject, "please hang", { reply: inbox });
    for await (const message of subscription) {
      expect(StreamChunk.parse(message.json())).toEqual({ type: "status", data: "ack" });
    }
    // `max: 2` ended the subscription: the caller is gone.
    await waitFor(() => fake.requestsTo("chat").length > before);
    const request = fake.requestsTo("chat")[before]!;
    await waitFor(() => request.isClosedEarly, 60_000);
    const [event] = await failed.waitFor(1, 60_000);
    expect(JSON.parse(event!.data)).toMatchObject({ cancelled: true });
    failed.unsubscribe();
  });

  it("registers our own contract as the `agentloop` micro service: endpoints, requests, errors, processing time", async () => {
    const mine = (await collect<Info>("$SRV.INFO.agentloop")).filter(
      (info) => info.metadata?.prefix === prefix,
    );
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ name: "agentloop", version: "0.1.0" });
    expect(mine[0]!.endpoints).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: "chat",
          subject: `${prefix}.agents.*.chat`,
          queue_group: `${prefix}_host`,
        }),
        expect.objectContaining({
          name: "control",
          subject: `${prefix}.agents.*.control`,
          queue_group: `${prefix}_host`,
        }),
      ]),
    );
    const statsBefore = await statsOf(mine[0]!.id);
    const good = await bus.request(
      chatSubject(prefix, "writer"),
      JSON.stringify({ session: "stats", text: "hi" }),
      {
        timeoutMs: 15_000,
      },
    );
    expect(JSON.parse(good.data)).toMatchObject({ ok: true, result: STREAMED.join("") });
    // The contract's replies stay as they were: plain JSON, no service-error headers.
    expect(good.headers).toBeUndefined();
    const bad = await bus.request(chatSubject(prefix, "writer"), "{}", { timeoutMs: 15_000 });
    expect(JSON.parse(bad.data)).toMatchObject({ ok: false, error: { code: "bad_request" } });
    expect(bad.headers).toBeUndefined();
    const statsAfter = await statsOf(mine[0]!.id);
    expect(statsAfter.num_requests - statsBefore.num_requests).toBe(2);
    expect(statsAfter.num_errors - statsBefore.num_errors).toBe(1);
    expect(statsAfter.last_error).toMatch(/^bad_request: /);
    expect(statsAfter.processing_time).toBeGreaterThan(statsBefore.processing_time);
  });
});

async function statsOf(
  id: string,
): Promise<{ num_requests: number; num_errors: number; processing_time: number; last_error?: string }> {
  const reply = await nc.request(`$SRV.STATS.agentloop.${id}`, "", { timeout: 5_000 });
  const stats = reply.json<{
    endpoints: Array<{
      name: string;
      data: {
        replies: { num_requests: number; num_errors: number; processing_time: number; last_error?: string };
      };
    }>;
  }>();
  const chat = stats.endpoints.find((endpoint) => endpoint.name === "chat");
  if (chat === undefined) throw new Error("no chat endpoint in $SRV.STATS");
  return chat.data.replies;
}
