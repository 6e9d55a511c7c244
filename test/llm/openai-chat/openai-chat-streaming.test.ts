import { afterEach, describe, expect, it } from "vitest";
import { NetworkError } from "../../../src/llm/errors.js";
import { OpenAIChatBackend } from "../../../src/llm/openai-chat/index.js";
import type { BackendSink, GenerateRequest } from "../../../src/llm/types.js";
import { chatChunksSse, type FakeOpenAI, startFakeOpenAI } from "../../../src/testing/index.js";
import { loadOpenAITranscript } from "../../support/fixtures.js";

function recordingSink() {
  const events: string[] = [];
  const sink: BackendSink = {
    onTextDelta: (text) => events.push(`text:${text}`),
    onReasoningDelta: (text) => events.push(`reasoning:${text}`),
  };
  return { sink, events };
}

const request: GenerateRequest = {
  messages: [{ role: "user", content: "Hi" }],
  options: { model: "gpt-4.1-mini" },
};

describe("OpenAIChatBackend streaming", () => {
  let server: FakeOpenAI | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function streamFrom(reply: Parameters<typeof startFakeOpenAI>[0]["chat"]) {
    server = await startFakeOpenAI({ chat: reply });
    const backend = new OpenAIChatBackend({ apiKey: "sk-test", baseUrl: server.baseUrl });
    const { sink, events } = recordingSink();
    const response = await backend.generateStream(request, sink);
    return { response, events };
  }

  it("passes text deltas through in order and reports usage with cached tokens", async () => {
    const { response, events } = await streamFrom([loadOpenAITranscript("openai-chat/text-stream.sse")]);
    expect(events).toEqual(
      ["Hello", "!", " How", " can", " I", " help", " you", " today", "?"].map((text) => `text:${text}`),
    );
    expect(response).toEqual({
      content: "Hello! How can I help you today?",
      toolCalls: [],
      finishReason: "stop",
      usage: { prompt: 1310, completion: 10, total: 1320, cached: 1152 },
    });
  });

  it("streams DeepSeek reasoning_content as reasoning deltas and collects it", async () => {
    const { response, events } = await streamFrom([
      loadOpenAITranscript("openai-chat/deepseek-reasoning.sse"),
    ]);
    expect(events).toEqual([
      "reasoning:The user asks",
      "reasoning: which is larger:",
      "reasoning: 9.11 or 9.8.",
      "text:9.8",
      "text: is larger.",
    ]);
    expect(response.reasoningContent).toBe("The user asks which is larger: 9.11 or 9.8.");
    expect(response.content).toBe("9.8 is larger.");
    expect(response.usage).toEqual({ prompt: 21, completion: 187, total: 208, cached: 0 });
  });

  it("accepts reasoning under delta.reasoning (vLLM, OpenRouter)", async () => {
    const chunk = (delta: object, finish_reason: string | null = null) => ({
      choices: [{ index: 0, delta, finish_reason }],
    });
    const { response, events } = await streamFrom([
      chatChunksSse([
        chunk({ reasoning: "Think" }),
        chunk({ reasoning: "ing." }),
        chunk({ content: "Done" }, "stop"),
      ]),
    ]);
    expect(events).toEqual(["reasoning:Think", "reasoning:ing.", "text:Done"]);
    expect(response.reasoningContent).toBe("Thinking.");
    expect(response.usage).toEqual({ prompt: 0, completion: 0, total: 0, cached: 0 });
  });

  it("joins two tool calls whose argument fragments are interleaved by index", async () => {
    const { response, events } = await streamFrom([
      loadOpenAITranscript("openai-chat/tool-calls-interleaved.sse"),
    ]);
    expect(events).toEqual([]);
    expect(response.toolCalls).toEqual([
      { id: "call_weather_paris", name: "get_weather", arguments: '{"city": "Paris"}' },
      { id: "call_time_tokyo", name: "current_time", arguments: '{"timezone": "Asia/Tokyo"}' },
    ]);
    expect(response.finishReason).toBe("tool_calls");
    expect(response.content).toBe("");
    expect(response.usage).toEqual({ prompt: 412, completion: 48, total: 460, cached: 0 });
  });

  it("orders tool calls by index even when a later index starts first", async () => {
    const call = (index: number, id: string | undefined, name: string | undefined, args: string) => ({
      choices: [{ index: 0, delta: { tool_calls: [{ index, id, function: { name, arguments: args } }] } }],
    });
    const { response } = await streamFrom([
      chatChunksSse([
        call(1, "call_b", "second", '{"b":'),
        call(0, "call_a", "first", "{}"),
        call(1, undefined, undefined, "2}"),
        { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
      ]),
    ]);
    expect(response.toolCalls).toEqual([
      { id: "call_a", name: "first", arguments: "{}" },
      { id: "call_b", name: "second", arguments: '{"b":2}' },
    ]);
  });

  it("normalises finish reasons (length, content_filter)", async () => {
    const finish = (reason: string) =>
      chatChunksSse([{ choices: [{ index: 0, delta: { content: "x" }, finish_reason: reason }] }]);
    const length = await streamFrom([finish("length")]);
    expect(length.response.finishReason).toBe("length");
    await server?.close();
    const filtered = await streamFrom([finish("content_filter")]);
    expect(filtered.response.finishReason).toBe("content_filter");
  });

  it("treats a stream that ends cleanly without a finish_reason as a cut (NetworkError)", async () => {
    server = await startFakeOpenAI({
      chat: [chatChunksSse([{ choices: [{ index: 0, delta: { content: "Hel" } }] }], { done: false })],
    });
    const backend = new OpenAIChatBackend({ apiKey: "sk-test", baseUrl: server.baseUrl });
    const { sink, events } = recordingSink();
    await expect(backend.generateStream(request, sink)).rejects.toBeInstanceOf(NetworkError);
    expect(events).toEqual(["text:Hel"]);
  });
});
