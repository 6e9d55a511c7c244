import { afterEach, describe, expect, it } from "vitest";
import { NetworkError } from "../../../src/llm/errors.js";
import { OpenAIResponsesBackend } from "../../../src/llm/openai-responses/index.js";
import type { BackendSink, GenerateRequest } from "../../../src/llm/types.js";
import {
  type FakeOpenAI,
  type OpenAIReply,
  responsesSse,
  startFakeOpenAI,
  turn,
} from "../../../src/testing/index.js";
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
  options: { model: "gpt-5-mini" },
};

describe("OpenAIResponsesBackend streaming", () => {
  let server: FakeOpenAI | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function streamFrom(reply: OpenAIReply) {
    server = await startFakeOpenAI({ responses: [reply] });
    const backend = new OpenAIResponsesBackend({ apiKey: "sk-test", baseUrl: server.baseUrl });
    const { sink, events } = recordingSink();
    const response = await backend.generateStream(request, sink);
    return { response, events };
  }

  it("passes output_text deltas through in order and reports usage with cached tokens", async () => {
    const { response, events } = await streamFrom(loadOpenAITranscript("openai-responses/text-stream.sse"));
    expect(events).toEqual(
      ["Hello", "!", " How", " can", " I", " help", " you", " today", "?"].map((text) => `text:${text}`),
    );
    expect(response).toEqual({
      content: "Hello! How can I help you today?",
      toolCalls: [],
      finishReason: "stop",
      usage: { prompt: 1290, completion: 12, total: 1302, cached: 1024 },
    });
  });

  it("streams reasoning summaries (parts separated) and assembles two function calls", async () => {
    const { response, events } = await streamFrom(
      loadOpenAITranscript("openai-responses/reasoning-tool-calls.sse"),
    );
    expect(events).toEqual([
      "reasoning:**Planning",
      "reasoning: the lookups**\n\nThe user wants",
      "reasoning: the weather in Paris.",
      "reasoning:\n\n",
      "reasoning:**Checking",
      "reasoning: the time**\n\nI also need the time in Tokyo.",
    ]);
    expect(response.reasoningContent).toBe(
      "**Planning the lookups**\n\nThe user wants the weather in Paris.\n\n**Checking the time**\n\nI also need the time in Tokyo.",
    );
    expect(events.map((event) => event.slice("reasoning:".length)).join("")).toBe(response.reasoningContent);
    expect(response.toolCalls).toEqual([
      { id: "call_weather_paris", name: "get_weather", arguments: '{"city": "Paris"}' },
      { id: "call_time_tokyo", name: "current_time", arguments: '{"timezone": "Asia/Tokyo"}' },
    ]);
    expect(response.content).toBe("");
    expect(response.finishReason).toBe("tool_calls");
    expect(response.usage).toEqual({ prompt: 2048, completion: 187, total: 2235, cached: 1536 });
  });

  it("renders a scripted turn the same way (reasoning, text, tool call)", async () => {
    const { response, events } = await streamFrom(
      turn({
        reasoning: ["Look", "ing"],
        text: ["Sure", "."],
        toolCalls: [{ id: "call_1", name: "current_time", arguments: "{}" }],
        usage: { prompt: 30, completion: 9, cached: 16 },
      }),
    );
    expect(events).toEqual(["reasoning:Look", "reasoning:ing", "text:Sure", "text:."]);
    expect(response).toEqual({
      content: "Sure.",
      toolCalls: [{ id: "call_1", name: "current_time", arguments: "{}" }],
      reasoningContent: "Looking",
      finishReason: "tool_calls",
      usage: { prompt: 30, completion: 9, total: 39, cached: 16 },
    });
  });

  it("reports response.incomplete as finish reason length with the partial text", async () => {
    const { response, events } = await streamFrom(
      responsesSse([
        { type: "response.created", response: { status: "in_progress", output: [] } },
        { type: "response.output_item.added", output_index: 0, item: { type: "message", content: [] } },
        { type: "response.output_text.delta", output_index: 0, content_index: 0, delta: "Once upon" },
        {
          type: "response.incomplete",
          response: {
            status: "incomplete",
            incomplete_details: { reason: "max_output_tokens" },
            output: [],
            usage: { input_tokens: 5, output_tokens: 16, input_tokens_details: { cached_tokens: 0 } },
          },
        },
      ]),
    );
    expect(events).toEqual(["text:Once upon"]);
    expect(response).toMatchObject({ content: "Once upon", finishReason: "length" });
    expect(response.usage).toEqual({ prompt: 5, completion: 16, total: 21, cached: 0 });
  });

  it("ignores event types it does not use (web search progress, annotations)", async () => {
    const { response } = await streamFrom(
      responsesSse([
        {
          type: "response.output_item.added",
          output_index: 0,
          item: { type: "web_search_call", id: "ws_1" },
        },
        { type: "response.web_search_call.searching", output_index: 0, item_id: "ws_1" },
        { type: "response.output_item.done", output_index: 0, item: { type: "web_search_call", id: "ws_1" } },
        { type: "response.output_text.delta", output_index: 1, content_index: 0, delta: "Found it." },
        { type: "response.output_text.annotation.added", output_index: 1, annotation: {} },
        { type: "response.completed", response: { status: "completed", output: [] } },
      ]),
    );
    expect(response.content).toBe("Found it.");
    expect(response.finishReason).toBe("stop");
  });

  it("treats a stream that ends before response.completed as a cut (NetworkError)", async () => {
    server = await startFakeOpenAI({
      responses: [
        responsesSse([
          { type: "response.created", response: { status: "in_progress", output: [] } },
          { type: "response.output_text.delta", output_index: 0, content_index: 0, delta: "Hel" },
        ]),
      ],
    });
    const backend = new OpenAIResponsesBackend({ apiKey: "sk-test", baseUrl: server.baseUrl });
    const { sink, events } = recordingSink();
    await expect(backend.generateStream(request, sink)).rejects.toBeInstanceOf(NetworkError);
    expect(events).toEqual(["text:Hel"]);
  });
});
