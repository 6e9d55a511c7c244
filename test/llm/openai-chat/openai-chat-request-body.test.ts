import { afterEach, describe, expect, it, vi } from "vitest";
import { ConfigurationError } from "../../../src/errors/configuration-error.js";
import { OpenAIChatBackend } from "../../../src/llm/openai-chat/index.js";
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
  {
    role: "user",
    content: [
      { type: "text", text: "What is in this picture, and the weather in Paris?" },
      { type: "image", mediaType: "image/jpeg", data: "QUJD" },
      { type: "image", url: "https://example.test/cat.png" },
    ],
  },
  {
    role: "assistant",
    content: "",
    reasoningContent: "Need the weather.",
    toolCalls: [{ id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' }],
  },
  { role: "tool", content: '{"temp":21}', toolCallId: "call_1", toolName: "get_weather" },
  { role: "assistant", content: "A cat. 21 °C in Paris.", reasoningContent: "Not sent back." },
  { role: "user", content: "Thanks" },
];

describe("OpenAIChatBackend request body", () => {
  let server: FakeOpenAI | undefined;
  afterEach(async () => {
    vi.unstubAllEnvs();
    await server?.close();
    server = undefined;
  });

  async function send(options: Partial<LlmOptions>, mode: "stream" | "generate", messages = history) {
    server = await startFakeOpenAI({ chat: [turn({ text: "ok" })] });
    const backend = new OpenAIChatBackend({
      apiKey: "sk-test",
      baseUrl: server.baseUrl,
      defaultHeaders: { "x-agentloop-test": "yes" },
    });
    const request: GenerateRequest = { messages, options: { model: "gpt-4.1-mini", ...options } };
    if (mode === "stream") await backend.generateStream(request, sink);
    else await backend.generate(request);
    const [recorded] = server.requestsTo("chat");
    expect(server.requests).toHaveLength(1);
    return recorded!;
  }

  it("sends messages, tools with tool_choice none, reasoning_effort and usage streaming options", async () => {
    const recorded = await send(
      {
        tools: [weatherTool],
        toolChoice: "none",
        reasoningEffort: "high",
        maxTokens: 512,
        temperature: 0.2,
        extraBody: { top_p: 0.9, metadata: { session: "s1" } },
      },
      "stream",
    );
    expect(recorded.method).toBe("POST");
    expect(recorded.path).toBe("/v1/chat/completions");
    expect(recorded.headers.authorization).toBe("Bearer sk-test");
    expect(recorded.headers["x-agentloop-test"]).toBe("yes");
    expect(recorded.body).toEqual({
      model: "gpt-4.1-mini",
      messages: [
        { role: "system", content: "You are terse." },
        {
          role: "user",
          content: [
            { type: "text", text: "What is in this picture, and the weather in Paris?" },
            { type: "image_url", image_url: { url: "data:image/jpeg;base64,QUJD" } },
            { type: "image_url", image_url: { url: "https://example.test/cat.png" } },
          ],
        },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_1",
              type: "function",
              function: { name: "get_weather", arguments: '{"city":"Paris"}' },
            },
          ],
          reasoning_content: "Need the weather.",
        },
        { role: "tool", tool_call_id: "call_1", content: '{"temp":21}' },
        { role: "assistant", content: "A cat. 21 °C in Paris." },
        { role: "user", content: "Thanks" },
      ],
      tools: [{ type: "function", function: weatherTool }],
      tool_choice: "none",
      reasoning_effort: "high",
      max_completion_tokens: 512,
      temperature: 0.2,
      stream: true,
      stream_options: { include_usage: true },
      top_p: 0.9,
      metadata: { session: "s1" },
    });
  });

  it("omits tools, tool_choice and stream_options when there are none and not streaming", async () => {
    const recorded = await send({}, "generate", [{ role: "user", content: "Hi" }]);
    expect(recorded.body).toEqual({
      model: "gpt-4.1-mini",
      messages: [{ role: "user", content: "Hi" }],
      stream: false,
    });
  });

  it("offers tools without tool_choice when the model may call them", async () => {
    const recorded = await send({ tools: [weatherTool], toolChoice: "auto" }, "stream", [
      { role: "user", content: "Hi" },
    ]);
    const body = recorded.body as Record<string, unknown>;
    expect(body.tools).toEqual([{ type: "function", function: weatherTool }]);
    expect(body).not.toHaveProperty("tool_choice");
  });

  it("lets extraBody override a field (e.g. max_tokens for an older server)", async () => {
    const recorded = await send(
      { maxTokens: 100, extraBody: { stream_options: { include_usage: false } } },
      "stream",
      [{ role: "user", content: "Hi" }],
    );
    expect(recorded.body).toMatchObject({
      max_completion_tokens: 100,
      stream_options: { include_usage: false },
    });
  });

  it("sends a placeholder key to a keyless compatible server given only a base URL", async () => {
    vi.stubEnv("OPENAI_API_KEY", undefined);
    server = await startFakeOpenAI({ chat: [turn({ text: "ok" })] });
    const backend = new OpenAIChatBackend({ baseUrl: server.baseUrl });
    await backend.generate({ messages: [{ role: "user", content: "Hi" }], options: { model: "llama" } });
    expect(server.requests[0]?.headers.authorization).toBe("Bearer not-needed");
  });

  it("takes the key from the OPENAI_API_KEY it is handed and refuses to start with neither key nor base URL", async () => {
    // The process's own variable is not read: a library reads only the environment it is given.
    vi.stubEnv("OPENAI_API_KEY", "sk-from-process");
    server = await startFakeOpenAI({ chat: [turn({ text: "ok" })] });
    await new OpenAIChatBackend({ baseUrl: server.baseUrl, env: { OPENAI_API_KEY: "sk-from-env" } }).generate(
      {
        messages: [{ role: "user", content: "Hi" }],
        options: { model: "gpt-4.1-mini" },
      },
    );
    expect(server.requests[0]?.headers.authorization).toBe("Bearer sk-from-env");

    vi.stubEnv("OPENAI_API_KEY", undefined);
    vi.stubEnv("OPENAI_BASE_URL", undefined);
    expect(() => new OpenAIChatBackend()).toThrow(ConfigurationError);
  });
});
