import { afterEach, describe, expect, it } from "vitest";
import { InvalidResponseError } from "../../../src/llm/errors.js";
import { OpenAIChatBackend } from "../../../src/llm/openai-chat/index.js";
import type { GenerateRequest } from "../../../src/llm/types.js";
import { type FakeOpenAI, type OpenAIReply, startFakeOpenAI, turn } from "../../../src/testing/index.js";
import { loadOpenAITranscript } from "../../support/fixtures.js";

const request: GenerateRequest = {
  messages: [{ role: "user", content: "Hi" }],
  options: { model: "gpt-4.1-mini" },
};

describe("OpenAIChatBackend.generate (non-streaming)", () => {
  let server: FakeOpenAI | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function generateFrom(reply: OpenAIReply) {
    server = await startFakeOpenAI({ chat: [reply] });
    return new OpenAIChatBackend({ apiKey: "sk-test", baseUrl: server.baseUrl }).generate(request);
  }

  it("returns text, tool calls in order, finish reason and usage with cached tokens", async () => {
    const response = await generateFrom(loadOpenAITranscript("openai-chat/tool-calls.json"));
    expect(response).toEqual({
      content: "Let me check both.",
      toolCalls: [
        { id: "call_weather_paris", name: "get_weather", arguments: '{"city":"Paris"}' },
        { id: "call_time_tokyo", name: "current_time", arguments: '{"timezone":"Asia/Tokyo"}' },
      ],
      finishReason: "tool_calls",
      usage: { prompt: 530, completion: 61, total: 591, cached: 384 },
    });
    expect((server?.requests[0]?.body as { stream?: boolean }).stream).toBe(false);
  });

  it("collects reasoning_content from the message", async () => {
    const response = await generateFrom(
      turn({ text: "9.8", reasoning: ["Compare ", "decimals."], usage: { prompt: 7, completion: 3 } }),
    );
    expect(response).toMatchObject({
      content: "9.8",
      reasoningContent: "Compare decimals.",
      finishReason: "stop",
    });
    expect(response.usage).toEqual({ prompt: 7, completion: 3, total: 10, cached: 0 });
  });

  it("rejects a body that is not a chat completion with InvalidResponseError", async () => {
    await expect(generateFrom({ type: "json", body: { choices: [] } })).rejects.toBeInstanceOf(
      InvalidResponseError,
    );
  });
});
