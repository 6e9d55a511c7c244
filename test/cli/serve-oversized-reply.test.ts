import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import type { AgentEvent } from "../../src/events/types.js";
import { type FakeOpenAI, startFakeOpenAI, turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, startServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, runCli, stackLines } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * End to end: an answer over nats-server's max_payload (1 MB by default) lost
 * its reply and its ChatCompleted, and the client waited for its timeout. Now the client gets a
 * `reply_too_large` error naming the chat, and the events go out truncated, with a marker.
 */

let server: NatsServer;
let bus: NatsBus;
let model: FakeOpenAI;
let serve: RunningServe;
let prefix: string;

/** Three deltas of 400,000 characters: each fits in a message, the whole answer does not. */
const DELTA = "0123456789".repeat(40_000);

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "oversized-reply-test" });
  model = await startFakeOpenAI({ chat: [turn({ text: [DELTA, DELTA, DELTA] })] });
  prefix = uniqueRoot();
  serve = startServe(
    ["--nats", server.url, "--prefix", prefix, "--provider", "openai-chat", "--base-url", model.baseUrl],
    { OPENAI_API_KEY: "test" },
  );
  await waitUntilServing(bus, prefix, serve);
});

afterAll(async () => {
  await serve.stop();
  await model.close();
  await bus.close();
  await server.stop();
});

describe("a chat answer over NATS max_payload", () => {
  it("reaches the client as reply_too_large with the chat's id; its events are truncated, not lost", async () => {
    expect(bus.maxPayload).toBeLessThan(3 * DELTA.length);
    const run = await runCli(
      [
        "chat",
        "--nats",
        server.url,
        "--prefix",
        prefix,
        "--session",
        "big",
        "--events",
        "jsonl",
        "tell me all",
      ],
      // Only a safety net: before the fix the reply never came and the CLI waited 30 minutes.
      { signal: AbortSignal.timeout(60_000) },
    );
    const events = linesOf(run.stdout).map((line) => JSON.parse(line) as AgentEvent & { truncated?: true });
    const completed = events.find((event) => event.kind === "ChatCompleted");
    expect(completed).toMatchObject({ kind: "ChatCompleted", truncated: true });
    expect(run.code).toBe(1);
    expect(linesOf(run.stderr)).toEqual([
      expect.stringMatching(
        new RegExp(
          `^agentloop: reply_too_large: the reply is \\d+ bytes, over the bus's ${bus.maxPayload}-byte limit; the full result is in the session history \\(chat ${completed?.chatId}\\)$`,
        ),
      ),
    ]);
    expect(stackLines(run.stderr)).toEqual([]);

    // The events: the deltas fit and go out whole; the ChatCompleted is cut, with a marker.
    const deltas = events.filter((event) => event.kind === "ModelTextDelta");
    expect(deltas.map((event) => (event as { delta: string }).delta)).toEqual([DELTA, DELTA, DELTA]);
    const marker = /…\[truncated: \d+ more characters did not fit the bus's \d+-byte message limit\]$/;
    expect((completed as { result: string }).result.startsWith(DELTA)).toBe(true);
    expect((completed as { result: string }).result).toMatch(marker);

    const served = await serve.stop();
    expect(served.code).toBe(0);
    expect(served.stderr).toMatch(
      /^agentloop serve: answered \S+\.agents\.assistant\.chat with reply_too_large: the reply is \d+ bytes/m,
    );
  }, 120_000);
});
