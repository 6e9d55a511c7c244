import { afterEach, describe, expect, it, vi } from "vitest";
import { AnthropicBackend } from "../../../src/llm/anthropic/anthropic-backend.js";
import type { LlmOptions, Message, ToolDefinition } from "../../../src/llm/types.js";
import { withoutTools } from "../../../src/llm/types.js";
import { type FakeAnthropic, startFakeAnthropic } from "../../../src/testing/index.js";
import { anthropicFixture } from "../../support/fixtures.js";
import {
  ADAPTIVE_MODEL,
  BUDGET_MODEL,
  backendFor,
  recordingSink,
  requestOf,
  user,
} from "./anthropic-test-kit.js";

let server: FakeAnthropic | undefined;
afterEach(async () => {
  vi.unstubAllEnvs();
  await server?.close();
  server = undefined;
});

const readFile: ToolDefinition = {
  name: "read_file",
  description: "Read a file",
  parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
};

/** Sends one streaming request and returns the body the server got. */
async function bodyOf(
  messages: Message[],
  options: Partial<LlmOptions> = {},
): Promise<Record<string, unknown>> {
  server = await startFakeAnthropic([anthropicFixture("text-stream")]);
  await backendFor(server).generateStream(requestOf(messages, options), recordingSink());
  const body = server.bodies()[0];
  if (!body) throw new Error("no request reached the fake server");
  return body;
}

const toolHistory: Message[] = [
  { role: "system", content: "You are terse." },
  user("Read a.txt and b.txt"),
  {
    role: "assistant",
    content: "",
    toolCalls: [
      { id: "toolu_a", name: "read_file", arguments: '{"path":"a.txt"}' },
      { id: "toolu_b", name: "read_file", arguments: '{"path":"b.txt"}' },
    ],
  },
  { role: "tool", content: "alpha", toolCallId: "toolu_a", toolName: "read_file" },
  { role: "tool", content: "beta", toolCallId: "toolu_b", toolName: "read_file" },
  user("Now compare them."),
];

describe("AnthropicBackend request body", () => {
  it("sends the leading system messages as the top-level system field", async () => {
    const body = await bodyOf([
      { role: "system", content: "You are terse." },
      { role: "system", content: [{ type: "text", text: "Answer in English." }] },
      user("Hi"),
    ]);

    expect(body.system).toBe("You are terse.\n\nAnswer in English.");
    expect(body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "Hi" }] }]);
  });

  it("merges consecutive tool results and the user text after them into one user message", async () => {
    const body = await bodyOf(toolHistory, { tools: [readFile] });

    expect(body.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "Read a.txt and b.txt" }] },
      {
        role: "assistant",
        content: [
          { type: "tool_use", id: "toolu_a", name: "read_file", input: { path: "a.txt" } },
          { type: "tool_use", id: "toolu_b", name: "read_file", input: { path: "b.txt" } },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "toolu_a", content: "alpha" },
          { type: "tool_result", tool_use_id: "toolu_b", content: "beta" },
          { type: "text", text: "Now compare them." },
        ],
      },
    ]);
    expect(body.tools).toEqual([
      {
        name: "read_file",
        description: "Read a file",
        input_schema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
      },
    ]);
    expect(body).not.toHaveProperty("tool_choice");
  });

  it("puts a cache breakpoint on the last block of the last message, only when prompt caching is on", async () => {
    const cached = await bodyOf(toolHistory, { tools: [readFile], promptCaching: true });
    const marked = JSON.stringify(cached.messages).match(/cache_control/g) ?? [];
    const last = (cached.messages as { content: Record<string, unknown>[] }[]).at(-1)?.content.at(-1);

    expect(marked).toHaveLength(1);
    expect(last).toEqual({ type: "text", text: "Now compare them.", cache_control: { type: "ephemeral" } });

    await server?.close();
    const plain = await bodyOf(toolHistory, { tools: [readFile] });
    expect(JSON.stringify(plain)).not.toContain("cache_control");
  });

  it('toolChoice "none" keeps the tool definitions and sends tool_choice none (withoutTools with tool traffic)', async () => {
    const options = withoutTools(
      { model: BUDGET_MODEL, tools: [readFile], reasoningEffort: "low" },
      toolHistory,
    );

    const body = await bodyOf(toolHistory, options);

    expect(body.tool_choice).toEqual({ type: "none" });
    expect(body.tools).toHaveLength(1);
    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 2048 });
  });

  it("budget thinking: thinking.enabled with budget_tokens, max_tokens above it, temperature dropped", async () => {
    const body = await bodyOf([user("Hi")], {
      model: BUDGET_MODEL,
      reasoningEffort: "medium",
      temperature: 0.2,
    });

    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 8192 });
    expect(body.max_tokens).toBe(8192 + 4096);
    expect(body).not.toHaveProperty("temperature");
    expect(body).not.toHaveProperty("output_config");
  });

  it("budget thinking raises a max_tokens at or below the budget", async () => {
    const body = await bodyOf([user("Hi")], {
      model: BUDGET_MODEL,
      reasoningEffort: "high",
      maxTokens: 1000,
    });

    expect(body.thinking).toEqual({ type: "enabled", budget_tokens: 24576 });
    expect(body.max_tokens).toBe(24576 + 1000);
  });

  it("adaptive thinking: thinking.adaptive with output_config.effort, temperature dropped", async () => {
    const body = await bodyOf([user("Hi")], {
      model: ADAPTIVE_MODEL,
      reasoningEffort: "high",
      temperature: 0.2,
    });

    expect(body.thinking).toEqual({ type: "adaptive" });
    expect(body.output_config).toEqual({ effort: "high" });
    expect(body.max_tokens).toBe(16384);
    expect(body).not.toHaveProperty("temperature");
  });

  it("without thinking: no thinking field, the given temperature and max_tokens", async () => {
    const body = await bodyOf([user("Hi")], { model: BUDGET_MODEL, temperature: 0.2, maxTokens: 777 });

    expect(body).not.toHaveProperty("thinking");
    expect(body.temperature).toBe(0.2);
    expect(body.max_tokens).toBe(777);
  });

  it("drops temperature for models that reject it (Claude 4.7 and later)", async () => {
    const body = await bodyOf([user("Hi")], { model: "claude-sonnet-5", temperature: 0.2 });

    expect(body).not.toHaveProperty("temperature");
  });

  it("merges extraBody into the body", async () => {
    const body = await bodyOf([user("Hi")], { extraBody: { metadata: { user_id: "u-1" }, top_k: 5 } });

    expect(body.metadata).toEqual({ user_id: "u-1" });
    expect(body.top_k).toBe(5);
    expect(body.model).toBe(BUDGET_MODEL);
  });

  it("sends defaultHeaders, and takes the API key from the ANTHROPIC_API_KEY it is handed when none is given", async () => {
    // The process's own variable is not read: a library reads only the environment it is given.
    vi.stubEnv("ANTHROPIC_API_KEY", "process-key");
    server = await startFakeAnthropic([anthropicFixture("text-stream")]);
    const backend = new AnthropicBackend({
      baseUrl: server.url,
      defaultHeaders: { "anthropic-beta": "beta-x" },
      env: { ANTHROPIC_API_KEY: "env-key" },
    });

    await backend.generateStream(requestOf([user("Hi")]), recordingSink());

    const headers = server.requests[0]?.headers;
    // SDK 1.x sends the API key as a bearer token (older SDKs used x-api-key).
    expect(headers?.authorization).toBe("Bearer env-key");
    expect(headers?.["anthropic-beta"]).toBe("beta-x");
  });

  it("sends no credential to a keyless server given by base URL only", async () => {
    vi.stubEnv("ANTHROPIC_API_KEY", "");
    vi.stubEnv("ANTHROPIC_AUTH_TOKEN", "");
    server = await startFakeAnthropic([anthropicFixture("text-stream")]);

    const response = await new AnthropicBackend({ baseUrl: server.url }).generateStream(
      requestOf([user("Hi")]),
      recordingSink(),
    );

    expect(response.content).toBe("Hello! How can I help you today?");
    expect(server.requests[0]?.headers).not.toHaveProperty("authorization");
    expect(server.requests[0]?.headers).not.toHaveProperty("x-api-key");
  });
});
