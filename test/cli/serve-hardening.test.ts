import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, controlSubject, sessionEventsPattern } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import {
  chatTurnSse,
  type FakeOpenAI,
  type OpenAIReply,
  type RecordedRequest,
  stallAfterFrames,
  startFakeOpenAI,
  turn,
} from "../../src/testing/index.js";
import { type Inbox, record, uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, startServe, waitUntilServing } from "../host/running-serve.js";
import { parseJsonl, runBinary } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * The hardening of the host through `agentloop serve` on a real nats-server, black-box: the session cap
 * (`--max-sessions`, `overloaded`), a queued chat cancelled before it ran still showing as a chat
 * in the events, and `seq` staying monotonic per session across passivation and restarts.
 */

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let fake: FakeOpenAI | undefined;
let serve: RunningServe | undefined;
const inboxes: Inbox[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "serve-hardening-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-hardening-"));
});

afterEach(async () => {
  for (const inbox of inboxes.splice(0)) inbox.unsubscribe();
  if (serve) expect((await serve.stop()).code).toBe(0);
  serve = undefined;
  await fake?.close();
  fake = undefined;
});

afterAll(async () => {
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

const STALL = "stall until stopped";

/**
 * The fake model: a message saying {@link STALL} gets a stream that stops after its first delta
 * (the chat stays busy until it is stopped); anything else a short answer; a compaction a summary.
 */
function fakeModel(request: RecordedRequest): OpenAIReply {
  const body = request.body as { stream?: boolean; messages?: Array<{ role: string; content: unknown }> };
  if (body.stream !== true) return turn({ text: "Summary of the talk." });
  const last = JSON.stringify(body.messages?.at(-1)?.content ?? "");
  if (last.includes(STALL)) return stallAfterFrames(chatTurnSse({ text: ["Working ", "on it"] }), 2);
  return turn({ text: "Done." });
}

async function startHost(args: readonly string[]): Promise<string> {
  fake = await startFakeOpenAI({ chat: fakeModel });
  const prefix = uniqueRoot();
  serve = startServe(
    [
      "--nats",
      server.url,
      "--prefix",
      prefix,
      "--provider",
      "openai-chat",
      "--base-url",
      fake.baseUrl,
      ...args,
    ],
    { OPENAI_API_KEY: "test" },
  );
  await waitUntilServing(bus, prefix, serve);
  return prefix;
}

async function ask(
  prefix: string,
  session: string,
  text: string,
  extra: { type?: string; stackable?: boolean } = {},
): Promise<Record<string, unknown>> {
  const payload = JSON.stringify({ session, text, ...extra });
  const reply = await bus.request(chatSubject(prefix, "assistant"), payload, { timeoutMs: 20_000 });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

async function control(prefix: string, session: string, command: string): Promise<Record<string, unknown>> {
  const reply = await bus.request(controlSubject(prefix, "assistant"), JSON.stringify({ session, command }), {
    timeoutMs: 20_000,
  });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

/** Records one session's events from now on. */
async function eventsOf(prefix: string, session: string): Promise<{ events: () => AgentEvent[] }> {
  const inbox = record(bus, sessionEventsPattern(prefix, "assistant", session));
  inboxes.push(inbox);
  await bus.flush();
  return { events: () => inbox.messages.map((message) => JSON.parse(message.data) as AgentEvent) };
}

describe("serve --max-sessions", () => {
  it("answers overloaded while every live session is busy, then makes room by passivating an idle one", async () => {
    const prefix = await startHost(["--max-sessions", "1"]);
    const s1 = await eventsOf(prefix, "s1");
    const busy = ask(prefix, "s1", STALL);
    await vi.waitFor(() => expect(s1.events().some((event) => event.kind === "ModelTextDelta")).toBe(true), {
      timeout: 15_000,
    });

    expect(await ask(prefix, "s2", "hello")).toEqual({
      ok: false,
      error: {
        code: "overloaded",
        message: "the host is at its limit of 1 live session and none is idle; try again later",
      },
    });
    // Control commands that need a new session are refused the same way; the live one is served.
    expect(await control(prefix, "s3", "new")).toMatchObject({ ok: false, error: { code: "overloaded" } });

    expect(await control(prefix, "s1", "stop")).toEqual({ ok: true });
    expect(await busy).toMatchObject({ ok: false, error: { code: "cancelled" } });
    // s1 is idle now: it is passivated to make room for s2.
    expect(await ask(prefix, "s2", "hello")).toMatchObject({ ok: true, result: "Done." });
    await vi.waitFor(() =>
      expect(
        s1
          .events()
          .filter((event) => event.kind === "StateChanged")
          .at(-1),
      ).toMatchObject({
        machine: "session",
        state: "stopped",
      }),
    );
    // And s1 comes back (passivating s2) with its conversation.
    expect(await ask(prefix, "s1", "again")).toMatchObject({ ok: true, result: "Done." });
  });

  it("refuses a bad --max-sessions with one line", async () => {
    const run = await runBinary(["serve", "--nats", server.url, "--max-sessions", "0"]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe('agentloop: --max-sessions must be a positive integer, got "0"\n');
  });
});

describe("serve: chats cancelled before they ran", () => {
  it("still emit ChatStarted then ChatFailed (cancelled), each under its own chat id", async () => {
    const prefix = await startHost([]);
    const s1 = await eventsOf(prefix, "s1");
    const failures = () => s1.events().filter((event) => event.kind === "ChatFailed");
    const running = ask(prefix, "s1", STALL);
    await vi.waitFor(() => expect(s1.events().some((event) => event.kind === "ModelTextDelta")).toBe(true), {
      timeout: 15_000,
    });
    // Two stackable notes queue behind the running chat: the later one replaces the earlier.
    const notes = ["note 1", "note 2"].map((text) =>
      ask(prefix, "s1", text, { type: "note", stackable: true }),
    );
    await vi.waitFor(() => expect(failures()).toHaveLength(1), { timeout: 15_000 });
    // The survivor is in the queue now: stop drops it along with the running chat.
    expect(await control(prefix, "s1", "stop")).toEqual({ ok: true });
    for (const reply of [running, ...notes]) {
      expect(await reply).toMatchObject({ ok: false, error: { code: "cancelled" } });
    }
    await vi.waitFor(() => expect(failures()).toHaveLength(3), { timeout: 15_000 });

    const started = s1.events().filter((event) => event.kind === "ChatStarted");
    expect(started.map((event) => event.text).sort()).toEqual(["note 1", "note 2", STALL]);
    expect(new Set(started.map((event) => event.chatId)).size).toBe(3);
    for (const start of started.filter((event) => event.text !== STALL)) {
      const ofChat = s1.events().filter((event) => event.chatId === start.chatId);
      expect(ofChat.map((event) => event.kind)).toEqual(["ChatStarted", "ChatFailed"]);
      expect(ofChat[1]).toMatchObject({ cancelled: true, error: { name: "ChatCancelledError" } });
    }
    expect(
      failures()
        .map((event) => (event.kind === "ChatFailed" ? event.error.message : ""))
        .sort(),
    ).toEqual([
      "cancelled by stop",
      "superseded by a newer stackable message of the same type",
      "the chat was cancelled",
    ]);
  });
});

describe("seq stays monotonic per session", () => {
  it("across a passivation (histories in memory)", async () => {
    const prefix = await startHost(["--idle-timeout", "1s"]);
    const s1 = await eventsOf(prefix, "s1");
    expect(await ask(prefix, "s1", "hello")).toMatchObject({ ok: true });
    await vi.waitFor(
      () =>
        expect(
          s1
            .events()
            .filter((event) => event.kind === "StateChanged")
            .at(-1),
        ).toMatchObject({
          machine: "session",
          state: "stopped",
        }),
      { timeout: 15_000 },
    );
    const before = s1.events().length;
    const lastSeq = Math.max(...s1.events().map((event) => event.seq));
    expect(await ask(prefix, "s1", "hello again")).toMatchObject({ ok: true });
    const after = s1.events().slice(before);
    expect(after.length).toBeGreaterThan(0);
    expect(Math.min(...after.map((event) => event.seq))).toBeGreaterThan(lastSeq);
  });

  it("across a host restart with --db", async () => {
    const db = join(directory, "restart.db");
    let prefix = await startHost(["--db", db]);
    let s1 = await eventsOf(prefix, "s1");
    expect(await ask(prefix, "s1", "hello")).toMatchObject({ ok: true });
    const lastSeq = Math.max(...s1.events().map((event) => event.seq));
    expect((await serve!.stop()).code).toBe(0);
    serve = undefined;
    await fake?.close();

    prefix = await startHost(["--db", db]);
    s1 = await eventsOf(prefix, "s1");
    expect(await ask(prefix, "s1", "hello again")).toMatchObject({ ok: true });
    expect(Math.min(...s1.events().map((event) => event.seq))).toBeGreaterThan(lastSeq);
  });

  it("across two chat --local processes on one --db session", async () => {
    fake = await startFakeOpenAI({ chat: fakeModel });
    const db = join(directory, "local.db");
    const args = ["chat", "--local", "--provider", "openai-chat", "--base-url", fake.baseUrl];
    const chat = (text: string) =>
      runBinary([...args, "--db", db, "--session", "s1", "--events", "jsonl", text], {
        env: { OPENAI_API_KEY: "test" },
      });
    const first = await chat("hello");
    expect(first.code).toBe(0);
    const second = await chat("hello again");
    expect(second.code).toBe(0);
    const firstSeqs = parseJsonl(first.stdout).events.map((event) => event.seq);
    const secondSeqs = parseJsonl(second.stdout).events.map((event) => event.seq);
    expect(firstSeqs[0]).toBe(1);
    expect(Math.min(...secondSeqs)).toBeGreaterThan(Math.max(...firstSeqs));
  });
});
