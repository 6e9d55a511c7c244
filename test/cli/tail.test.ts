import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { createEventLogger, parseSince } from "../../src/cli/commands/tail.js";
import type { AgentEvent } from "../../src/events/types.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, startServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, runCli, waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let serve: RunningServe;
let prefix: string;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "tail-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-tail-"));
  prefix = uniqueRoot();
  serve = startServe(["--nats", server.url, "--prefix", prefix]);
  await waitUntilServing(bus, prefix, serve);
});

afterAll(async () => {
  await serve.stop();
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

/** Runs one chat through the host and returns every event it published (seen live on the bus). */
async function chatAndCollect(session: string, text: string): Promise<AgentEvent[]> {
  const inbox = record(bus, `${prefix}.events.assistant.${session}.>`);
  await bus.flush();
  const reply = await bus.request(chatSubject(prefix, "assistant"), JSON.stringify({ session, text }), {
    timeoutMs: 15_000,
  });
  expect(JSON.parse(reply.data)).toMatchObject({ ok: true });
  await bus.flush();
  await waitFor(() => inbox.messages.some((message) => message.subject.endsWith(".ChatCompleted")));
  inbox.unsubscribe();
  return inbox.messages.map((message) => JSON.parse(message.data) as AgentEvent);
}

/** The complete lines `tail` has written so far: a line still being written is read next time. */
async function jsonlEvents(path: string): Promise<AgentEvent[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  return linesOf(text.slice(0, text.lastIndexOf("\n") + 1)).map((line) => JSON.parse(line) as AgentEvent);
}

describe("agentloop tail", () => {
  it("--since replays the stored events, then follows live ones, without loss or repeats", async () => {
    const before = await chatAndCollect("t1", "first message");
    const jsonl = join(directory, "since.jsonl");
    const controller = new AbortController();
    const tail = runCli(
      ["tail", "--nats", server.url, "--prefix", prefix, "--since", "1h", "--jsonl", jsonl],
      {
        signal: controller.signal,
      },
    );
    const isT1 = (event: AgentEvent) => event.session === "t1";
    await waitForFile(jsonl, (events) => events.filter(isT1).length >= before.length);
    const after = await chatAndCollect("t2", "second message");
    await waitForFile(
      jsonl,
      (events) => events.filter((event) => event.session === "t2").length >= after.length,
    );
    controller.abort();
    const run = await tail;
    expect(run.code).toBe(0);
    expect(run.stderr).toBe("");
    const stored = await jsonlEvents(jsonl);
    const key = (event: AgentEvent) => `${event.session}/${event.chatId}/${event.seq}`;
    expect(stored.filter(isT1).map(key)).toEqual(before.map(key));
    expect(stored.filter((event) => event.session === "t2").map(key)).toEqual(after.map(key));
    // One readable line per event on stdout, no colours off a TTY.
    const lines = linesOf(run.stdout);
    expect(lines).toHaveLength(stored.length);
    expect(run.stdout).not.toContain("\u001b[");
    const completed = lines.find((line) => line.includes("assistant/t1") && line.includes("ChatCompleted"));
    expect(completed).toMatch(/^\d\d:\d\d:\d\d\.\d{3} assistant\/t1 #\d+ ChatCompleted done \[demo\] /);
  });

  it("follows only the events matching FILTER", async () => {
    const controller = new AbortController();
    const jsonl = join(directory, "filter.jsonl");
    const tail = runCli(
      [
        "tail",
        `${prefix}.events.*.*.ChatCompleted`,
        "--nats",
        server.url,
        "--prefix",
        prefix,
        "--jsonl",
        jsonl,
      ],
      { signal: controller.signal },
    );
    // Live only: keep chatting until the tail (subscribing in the background) has seen one.
    let chats = 0;
    while ((await jsonlEvents(jsonl)).length === 0 && chats < 20) {
      await chatAndCollect(`f${chats++}`, "hi");
    }
    controller.abort();
    const run = await tail;
    expect(run.code).toBe(0);
    const stored = await jsonlEvents(jsonl);
    expect(stored.length).toBeGreaterThan(0);
    expect(stored.every((event) => event.kind === "ChatCompleted")).toBe(true);
    expect(linesOf(run.stdout)).toHaveLength(stored.length);
  });

  it("refuses bad arguments with exit code 2", async () => {
    expect((await runCli(["tail", "--since", "yesterday", "--nats", server.url])).code).toBe(2);
    expect((await runCli(["tail", "a..b", "--nats", server.url])).code).toBe(2);
    const unreachable = await runCli(["tail", "--nats", "nats://127.0.0.1:1"]);
    expect(unreachable.code).toBe(1);
    expect(linesOf(unreachable.stderr)).toHaveLength(1);
  });
});

async function waitForFile(path: string, condition: (events: AgentEvent[]) => boolean): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!condition(await jsonlEvents(path))) {
    if (Date.now() > deadline) throw new Error(`${path} never held the expected events`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe("tail helpers", () => {
  it("parses --since as a duration or a stream sequence", () => {
    expect(parseSince(undefined)).toBeUndefined();
    expect(parseSince("42")).toEqual({ seq: 42 });
    expect(parseSince("90s")).toEqual({ durationMs: 90_000 });
    expect(parseSince("5m")).toEqual({ durationMs: 300_000 });
    expect(parseSince("2h")).toEqual({ durationMs: 7_200_000 });
    expect(parseSince("1d")).toEqual({ durationMs: 86_400_000 });
    expect(parseSince("250ms")).toEqual({ durationMs: 250 });
    expect(() => parseSince("0")).toThrow(/--since/);
    expect(() => parseSince("soon")).toThrow(/--since/);
    expect(() => parseSince(true)).toThrow(/--since/);
    // Past what a stream sequence can be (and JSON can name exactly): a usage error, not the server's.
    expect(() => parseSince("18446744073709551615")).toThrow(/--since/);
    expect(() => parseSince("1000000000000000000000000000000")).toThrow(/--since/);
    expect(parseSince(String(Number.MAX_SAFE_INTEGER))).toEqual({ seq: Number.MAX_SAFE_INTEGER });
    // Longer ago than the clock's start: from the start.
    const ages = parseSince(`${"9".repeat(30)}d`);
    expect(ages).toEqual({ durationMs: expect.any(Number) });
    expect(Number.isFinite((ages as { durationMs: number }).durationMs)).toBe(true);
  });

  it("colours lines only on a TTY", () => {
    const event: AgentEvent = {
      kind: "ChatFailed",
      agent: "bot",
      session: "s1",
      chatId: "c1",
      seq: 3,
      ts: "2026-01-01T12:00:00.000Z",
      iteration: 0,
      error: { code: "rate_limit", retryable: true, name: "RateLimitError", message: "slow down" },
      cancelled: false,
    };
    const capture = (isTTY: boolean) => {
      let text = "";
      const stdout = Object.assign(
        new Writable({
          write(chunk, _encoding, callback) {
            text += String(chunk);
            callback();
          },
        }),
        { isTTY },
      );
      const logger = createEventLogger({ stdout });
      logger.write(event);
      return text;
    };
    expect(capture(false)).toBe("12:00:00.000 bot/s1 #3 ChatFailed failed: RateLimitError: slow down\n");
    expect(capture(true)).toContain("\u001b[31m");
  });
});
