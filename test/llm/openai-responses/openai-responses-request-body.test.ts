import { afterEach, describe, expect, it } from "vitest";
import { OpenAIResponsesBackend } from "../../../src/llm/openai-responses/index.js";
import type { GenerateRequest, LlmOptions, Message } from "../../../src/llm/types.js";
import { type FakeOpenAI, startFakeOpenAI, turn } from "../../../src/testing/index.js";

const sink = { onTextDelta: () => {}, onReasoningDelta: () => {} };

const weatherTool = {
  name: "get_weather",
  description: "Current weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

const history: Message[] = [
  { role: "system", content: "You are terse." },
  { role: "system", content: "Use metric units." },
  {
    role: "user",
    content: [
      { type: "text", text: "What is this, and the weather in Paris?" },
      { type: "image", mediaType: "image/png", data: "QUJD" },
    ],
  },
  {
    role: "assistant",
    content: "Checking.",
    reasoningContent: "Not sent back.",
    toolCalls: [
      { id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
      { id: "call_2", name: "get_weather", arguments: '{"city":"Lyon"}' },
    ],
  },
  { role: "tool", content: '{"temp":21}', toolCallId: "call_1", toolName: "get_weather" },
  { role: "tool", content: '{"temp":24}', toolCallId: "call_2", toolName: "get_weather" },
  { role: "assistant", content: "A cat. 21 °C." },
  { role: "user", content: "Thanks" },
];

describe("OpenAIResponsesBackend request body", () => {
  let server: FakeOpenAI | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function send(options: Partial<LlmOptions>, mode: "stream" | "generate", messages = history) {
    server = await startFakeOpenAI({ responses: [turn({ text: "ok" })] });
    const backend = new OpenAIResponsesBackend({ apiKey: "sk-test", baseUrl: server.baseUrl });
    const request: GenerateRequest = { messages, options: { model: "gpt-5-mini", ...options } };
    if (mode === "stream") await backend.generateStream(request, sink);
    else await backend.generate(request);
    expect(server.requests).toHaveLength(1);
    return server.requestsTo("responses")[0]!;
  }

  it("sends instructions, input items, tools, tool_choice none, reasoning and store false", async () => {
    const recorded = await send(
      {
        tools: [weatherTool],
        toolChoice: "none",
        reasoningEffort: "medium",
        maxTokens: 2048,
        extraBody: { parallel_tool_calls: false },
      },
      "stream",
    );
    expect(recorded.path).toBe("/v1/responses");
    expect(recorded.headers.authorization).toBe("Bearer sk-test");
    expect(recorded.body).toEqual({
      model: "gpt-5-mini",
      instructions: "You are terse.\n\nUse metric units.",
      input: [
        {
          type: "message",
          role: "user",
          content: [
            { type: "input_text", text: "What is this, and the weather in Paris?" },
            { type: "input_image", image_url: "data:image/png;base64,QUJD", detail: "auto" },
          ],
        },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking." }] },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
        { type: "function_call", call_id: "call_2", name: "get_weather", arguments: '{"city":"Lyon"}' },
        { type: "function_call_output", call_id: "call_1", output: '{"temp":21}' },
        { type: "function_call_output", call_id: "call_2", output: '{"temp":24}' },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "A cat. 21 °C." }] },
        { type: "message", role: "user", content: [{ type: "input_text", text: "Thanks" }] },
      ],
      store: false,
      stream: true,
      max_output_tokens: 2048,
      reasoning: { effort: "medium", summary: "auto" },
      tools: [{ type: "function", ...weatherTool, strict: false }],
      tool_choice: "none",
      parallel_tool_calls: false,
    });
  });

  it("omits instructions, tools and reasoning when there are none", async () => {
    const recorded = await send({ temperature: 0.5 }, "generate", [{ role: "user", content: "Hi" }]);
    expect(recorded.body).toEqual({
      model: "gpt-5-mini",
      input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "Hi" }] }],
      store: false,
      stream: false,
      temperature: 0.5,
    });
  });

  it("offers tools without tool_choice when the model may call them", async () => {
    const recorded = await send({ tools: [weatherTool] }, "stream", [{ role: "user", content: "Hi" }]);
    const body = recorded.body as Record<string, unknown>;
    expect(body.tools).toEqual([{ type: "function", ...weatherTool, strict: false }]);
    expect(body).not.toHaveProperty("tool_choice");
  });
});
