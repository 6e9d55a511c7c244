import { afterEach, describe, expect, it } from "vitest";
import { InvalidResponseError, ServerError } from "../../../src/llm/errors.js";
import { OpenAIResponsesBackend } from "../../../src/llm/openai-responses/index.js";
import type { GenerateRequest } from "../../../src/llm/types.js";
import { type FakeOpenAI, type OpenAIReply, startFakeOpenAI, turn } from "../../../src/testing/index.js";
import { loadOpenAITranscript } from "../../support/fixtures.js";

const request: GenerateRequest = {
  messages: [{ role: "user", content: "Hi" }],
  options: { model: "gpt-5-mini" },
};

describe("OpenAIResponsesBackend.generate (non-streaming)", () => {
  let server: FakeOpenAI | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function generateFrom(reply: OpenAIReply) {
    server = await startFakeOpenAI({ responses: [reply] });
    return new OpenAIResponsesBackend({ apiKey: "sk-test", baseUrl: server.baseUrl }).generate(request);
  }

  it("returns text, reasoning summary and usage with cached tokens", async () => {
    const response = await generateFrom(loadOpenAITranscript("openai-responses/text.json"));
    expect(response).toEqual({
      content: "Hello! How can I help you today?",
      toolCalls: [],
      reasoningContent: "**Answering**\n\nA short greeting.",
      finishReason: "stop",
      usage: { prompt: 1290, completion: 40, total: 1330, cached: 1024 },
    });
    expect(server?.requests[0]?.body).toMatchObject({ stream: false, store: false });
  });

  it("returns function calls in output order", async () => {
    const response = await generateFrom(
      turn({
        toolCalls: [
          { id: "call_a", name: "first", arguments: "{}" },
          { id: "call_b", name: "second", arguments: '{"x":1}' },
        ],
      }),
    );
    expect(response.toolCalls).toEqual([
      { id: "call_a", name: "first", arguments: "{}" },
      { id: "call_b", name: "second", arguments: '{"x":1}' },
    ]);
    expect(response.finishReason).toBe("tool_calls");
  });

  it("throws the error a failed response carries", async () => {
    const failed = {
      status: "failed",
      output: [],
      error: { code: "server_error", message: "The model crashed." },
    };
    await expect(generateFrom({ type: "json", body: failed })).rejects.toBeInstanceOf(ServerError);
  });

  it("rejects an output item of a known type but the wrong shape", async () => {
    const body = { status: "completed", output: [{ type: "function_call", name: "x" }] };
    await expect(generateFrom({ type: "json", body })).rejects.toBeInstanceOf(InvalidResponseError);
  });
});
