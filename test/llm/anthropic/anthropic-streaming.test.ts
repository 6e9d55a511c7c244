import { afterEach, describe, expect, it } from "vitest";
import type { Message } from "../../../src/llm/types.js";
import {
  anthropicSse,
  anthropicStream,
  type FakeAnthropic,
  startFakeAnthropic,
} from "../../../src/testing/index.js";
import { anthropicFixture, loadAnthropicTranscript } from "../../support/fixtures.js";
import { BUDGET_MODEL, backendFor, recordingSink, requestOf, user } from "./anthropic-test-kit.js";

let server: FakeAnthropic | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("AnthropicBackend.generateStream", () => {
  it("streams text deltas in order and resolves with the full response", async () => {
    server = await startFakeAnthropic([anthropicFixture("text-stream")]);
    const sink = recordingSink();

    const response = await backendFor(server).generateStream(requestOf([user("Hi")]), sink);

    expect(sink.deltas).toEqual([
      { kind: "text", text: "Hello" },
      { kind: "text", text: "!" },
      { kind: "text", text: " How can" },
      { kind: "text", text: " I help you today?" },
    ]);
    expect(response).toEqual({
      content: "Hello! How can I help you today?",
      toolCalls: [],
      finishReason: "stop",
      usage: { prompt: 25, completion: 12, total: 37, cached: 0 },
    });
    expect(server.requests).toHaveLength(1);
    const [request] = server.requests;
    expect(request?.path).toBe("/v1/messages");
    expect(request?.headers.authorization).toBe("Bearer test-key");
    expect(request?.headers["anthropic-version"]).toBeTypeOf("string");
    expect(request?.body).toMatchObject({
      model: BUDGET_MODEL,
      stream: true,
      max_tokens: 4096,
      messages: [{ role: "user", content: [{ type: "text", text: "Hi" }] }],
    });
  });

  it("keeps thinking with its signature and redacted thinking, and replays them first in the next request", async () => {
    server = await startFakeAnthropic([
      anthropicFixture("thinking-tool-use"),
      anthropicFixture("text-stream"),
    ]);
    const backend = backendFor(server);
    const sink = recordingSink();
    const history: Message[] = [user("What's the weather in Paris?")];

    const first = await backend.generateStream(requestOf(history, { reasoningEffort: "low" }), sink);

    expect(sink.deltas).toEqual([
      { kind: "reasoning", text: "The user wants the weather in Paris. " },
      { kind: "reasoning", text: "I should call get_weather with celsius." },
      { kind: "text", text: "I'll check the weather" },
      { kind: "text", text: " for you." },
    ]);
    const [signature, redacted] = [
      /"signature":"([^"]+)"/.exec(loadAnthropicTranscript("thinking-tool-use").join(""))?.[1],
      /"data":"([^"]+)"/.exec(loadAnthropicTranscript("thinking-tool-use").join(""))?.[1],
    ];
    expect(signature).toMatch(/^EqQB/);
    expect(first.reasoningContent).toBe(
      "The user wants the weather in Paris. I should call get_weather with celsius.",
    );
    expect(first.thinkingBlocks).toEqual([
      {
        type: "thinking",
        thinking: "The user wants the weather in Paris. I should call get_weather with celsius.",
        signature,
      },
      { type: "redacted_thinking", data: redacted },
    ]);
    expect(first.content).toBe("I'll check the weather for you.");
    expect(first.toolCalls).toEqual([
      {
        id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        name: "get_weather",
        arguments: '{"location": "Paris, France", "unit": "celsius"}',
      },
    ]);
    expect(first.finishReason).toBe("tool_calls");
    expect(first.usage).toEqual({ prompt: 512, completion: 158, total: 670, cached: 0 });

    // The loop appends the assistant message as assembled from the response, then the result.
    history.push(
      {
        role: "assistant",
        content: first.content,
        toolCalls: first.toolCalls,
        reasoningContent: first.reasoningContent,
        thinkingBlocks: first.thinkingBlocks,
      },
      {
        role: "tool",
        content: "18°C, cloudy",
        toolCallId: "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        toolName: "get_weather",
      },
    );
    await backend.generateStream(requestOf(history, { reasoningEffort: "low" }), recordingSink());

    const replayed = server.bodies()[1]?.messages;
    expect(replayed).toEqual([
      { role: "user", content: [{ type: "text", text: "What's the weather in Paris?" }] },
      {
        role: "assistant",
        content: [
          {
            type: "thinking",
            thinking: "The user wants the weather in Paris. I should call get_weather with celsius.",
            signature,
          },
          { type: "redacted_thinking", data: redacted },
          { type: "text", text: "I'll check the weather for you." },
          {
            type: "tool_use",
            id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            name: "get_weather",
            input: { location: "Paris, France", unit: "celsius" },
          },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", content: "18°C, cloudy" },
        ],
      },
    ]);
  });

  it("assembles tool input from input_json_delta fragments and keeps two calls in the model's order", async () => {
    server = await startFakeAnthropic([anthropicFixture("two-tool-calls")]);
    const sink = recordingSink();

    const response = await backendFor(server).generateStream(requestOf([user("Read a.txt and b.txt")]), sink);

    expect(sink.texts()).toEqual(["Let me read both files."]);
    expect(response.toolCalls).toEqual([
      { id: "toolu_01A09q90qw90lq917835lq9", name: "read_file", arguments: '{"path": "a.txt"}' },
      { id: "toolu_01B8xy2kQ3mJpW5nRcT7vZsL", name: "read_file", arguments: '{"path": "b.txt"}' },
    ]);
    expect(response.finishReason).toBe("tool_calls");
  });

  it("counts cache reads and writes in the prompt and cache reads as cached", async () => {
    server = await startFakeAnthropic([anthropicFixture("two-tool-calls")]);

    const response = await backendFor(server).generateStream(requestOf([user("Read")]), recordingSink());

    // input 12 + cache write 248 + cache read 1800; output 96 (message_delta is cumulative).
    expect(response.usage).toEqual({ prompt: 2060, completion: 96, total: 2156, cached: 1800 });
  });

  it("ignores block types and events it does not know", async () => {
    const frames = anthropicSse([
      { type: "message_start", message: { id: "msg_1", usage: { input_tokens: 5, output_tokens: 1 } } },
      {
        type: "content_block_start",
        index: 0,
        content_block: { type: "server_tool_use", id: "srv_1", name: "x" },
      },
      { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: "{}" } },
      { type: "content_block_stop", index: 0 },
      { type: "content_block_start", index: 1, content_block: { type: "text", text: "" } },
      { type: "content_block_delta", index: 1, delta: { type: "citations_delta", citation: { type: "x" } } },
      { type: "content_block_delta", index: 1, delta: { type: "text_delta", text: "ok" } },
      { type: "content_block_stop", index: 1 },
      { type: "future_event", payload: 1 },
      { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2 } },
      { type: "message_stop" },
    ]);
    server = await startFakeAnthropic([anthropicStream(frames)]);
    const sink = recordingSink();

    const response = await backendFor(server).generateStream(requestOf([user("Hi")]), sink);

    expect(sink.texts()).toEqual(["ok"]);
    expect(response.content).toBe("ok");
    expect(response.toolCalls).toEqual([]);
  });

  it("calls nothing on the sink after message_stop", async () => {
    const frames = [
      ...loadAnthropicTranscript("text-stream"),
      ...anthropicSse([
        { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: " late" } },
      ]),
    ];
    server = await startFakeAnthropic([anthropicStream(frames)]);
    const sink = recordingSink();

    const response = await backendFor(server).generateStream(requestOf([user("Hi")]), sink);

    expect(response.content).toBe("Hello! How can I help you today?");
    expect(sink.texts().join("")).toBe("Hello! How can I help you today?");
  });
});
