import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AnthropicBackend } from "../../src/llm/anthropic/anthropic-backend.js";
import { NetworkError, ServerError } from "../../src/llm/errors.js";
import { OpenAIChatBackend } from "../../src/llm/openai-chat/openai-chat-backend.js";
import type { BackendSink, GenerateRequest } from "../../src/llm/types.js";
import {
  type FakeProvider,
  type FixtureReplay,
  type ProviderRecorder,
  readFixture,
  recordProvider,
  replayFixture,
  startFakeProvider,
} from "../../src/testing/index.js";

const SECRET = "sk-ant-recorder-secret-0123456789";

let directory: string;
let fixturePath: string;
const running: Array<FakeProvider | ProviderRecorder | FixtureReplay> = [];

beforeEach(() => {
  directory = mkdtempSync(join(tmpdir(), "agentloop-recorder-"));
  fixturePath = join(directory, "exchange.jsonl");
});
afterEach(async () => {
  for (const server of running.splice(0)) await server.close();
  rmSync(directory, { recursive: true, force: true });
});

function sink(): BackendSink & { texts: string[] } {
  const texts: string[] = [];
  return { texts, onTextDelta: (text) => texts.push(text), onReasoningDelta: () => {} };
}

const request = (model: string): GenerateRequest => ({
  messages: [{ role: "user", content: "hello" }],
  options: { model },
});

describe("recordProvider / replayFixture", () => {
  it("records an Anthropic stream through the real SDK, one event per line, without the API key", async () => {
    // The "real" provider is a fake one: no real API in tests.
    const upstream = await startFakeProvider("anthropic", {
      script: [
        { deltas: ["Hello", " there"], toolCalls: [{ id: "toolu_1", name: "echo", arguments: "{}" }] },
      ],
    });
    running.push(upstream);
    const recorder = await recordProvider({ upstream: upstream.url, fixturePath });
    running.push(recorder);
    const backend = new AnthropicBackend({ apiKey: SECRET, baseUrl: recorder.url });

    const streamed = sink();
    const live = await backend.generateStream(request("claude-haiku-4-5"), streamed);

    expect(streamed.texts).toEqual(["Hello", " there"]);
    // The key went upstream (the SDK sends it as a header) but not into the fixture.
    expect(JSON.stringify(upstream.requests[0]?.headers)).toContain(SECRET);
    const text = readFileSync(fixturePath, "utf8");
    expect(text).not.toContain(SECRET);
    const lines = text
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(lines[0]).toMatchObject({ type: "request", method: "POST", path: "/v1/messages" });
    expect(lines[0].body).toMatchObject({ model: "claude-haiku-4-5", stream: true });
    expect(lines[1]).toMatchObject({ type: "response", status: 200 });
    expect(lines.slice(2).map((line) => line.event)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);

    const replay = await replayFixture(fixturePath);
    running.push(replay);
    const replayed = sink();
    const again = await new AnthropicBackend({ apiKey: "other", baseUrl: replay.url }).generateStream(
      request("claude-haiku-4-5"),
      replayed,
    );
    expect(replayed.texts).toEqual(["Hello", " there"]);
    expect(again).toEqual(live);
    expect(replay.requests[0]?.body).toEqual(upstream.requests[0]?.body);
  });

  it("forwards under the upstream's base path and records JSON bodies and [DONE] frames", async () => {
    const upstream = await startFakeProvider("openai-chat", {
      script: [{ text: "streamed" }, { text: "whole" }],
    });
    running.push(upstream);
    // The SDK's base URL is the recorder where it would be `…/v1`.
    const recorder = await recordProvider({ upstream: upstream.baseUrl, fixturePath });
    running.push(recorder);
    const backend = new OpenAIChatBackend({ apiKey: "key", baseUrl: recorder.url });

    await backend.generateStream(request("gpt-4.1-mini"), sink());
    const whole = await backend.generate(request("gpt-4.1-mini"));

    expect(whole.content).toBe("whole");
    expect(upstream.requests.map((r) => r.path)).toEqual(["/v1/chat/completions", "/v1/chat/completions"]);
    const exchanges = readFixture(fixturePath);
    expect(exchanges).toHaveLength(2);
    expect(exchanges[0]?.events?.at(-1)).toEqual({ data: "[DONE]" });
    expect(exchanges[1]?.body).toMatchObject({ object: "chat.completion" });

    const replay = await replayFixture(fixturePath);
    running.push(replay);
    const replayBackend = new OpenAIChatBackend({ apiKey: "key", baseUrl: replay.url });
    const streamed = sink();
    await replayBackend.generateStream(request("gpt-4.1-mini"), streamed);
    expect(streamed.texts.join("")).toBe("streamed");
    expect((await replayBackend.generate(request("gpt-4.1-mini"))).content).toBe("whole");

    // A third request has no exchange: a 500 that says so.
    const failure = await replayBackend.generate(request("gpt-4.1-mini")).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ServerError);
    expect((failure as Error).message).toMatch(/request 3 .* the fixture has 2 exchange/);
  });

  it("records a stream the upstream cut, and the replay cuts it at the same place", async () => {
    const upstream = await startFakeProvider("anthropic", {
      script: [{ fault: "disconnect_after", deltas: ["par", "tial"], afterDeltas: 1 }],
    });
    running.push(upstream);
    const recorder = await recordProvider({ upstream: upstream.url, fixturePath });
    running.push(recorder);

    const live = sink();
    const liveFailure = await new AnthropicBackend({ apiKey: "k", baseUrl: recorder.url })
      .generateStream(request("claude-haiku-4-5"), live)
      .catch((error: unknown) => error);
    expect(liveFailure).toBeInstanceOf(NetworkError);
    expect(live.texts).toEqual(["par"]);
    const [exchange] = readFixture(fixturePath);
    expect(exchange?.isCut).toBe(true);

    const replay = await replayFixture(fixturePath);
    running.push(replay);
    const replayed = sink();
    const replayFailure = await new AnthropicBackend({ apiKey: "k", baseUrl: replay.url })
      .generateStream(request("claude-haiku-4-5"), replayed)
      .catch((error: unknown) => error);
    expect(replayFailure).toBeInstanceOf(NetworkError);
    expect(replayed.texts).toEqual(["par"]);
  });

  it("answers 502 naming the upstream when the real provider cannot be reached", async () => {
    // An upstream that drops every connection, held open for the test: a freed port could be
    // handed to the recorder itself (or to another test's server) by the next listen(0).
    const gone = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => gone.listen(0, "127.0.0.1", resolve));
    const { port } = gone.address() as AddressInfo;
    running.push({ close: () => new Promise<void>((resolve) => gone.close(() => resolve())) } as never);
    const recorder = await recordProvider({ upstream: `http://127.0.0.1:${port}`, fixturePath });
    running.push(recorder);

    const failure = await new AnthropicBackend({ apiKey: "k", baseUrl: recorder.url })
      .generate(request("claude-haiku-4-5"))
      .catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(ServerError);
    expect((failure as ServerError).statusCode).toBe(502);
    expect((failure as Error).message).toMatch(/recordProvider: the upstream failed/);
  });

  it("says which line of a fixture is broken", async () => {
    const { writeFileSync } = await import("node:fs");
    writeFileSync(fixturePath, '{"type":"response","status":200,"headers":{}}\n');
    expect(() => readFixture(fixturePath)).toThrow(
      /exchange\.jsonl:1: a "response" record before any request/,
    );
    writeFileSync(fixturePath, "not json\n");
    await expect(replayFixture(fixturePath)).rejects.toThrow(/exchange\.jsonl:1: not a JSON line/);
  });
});
