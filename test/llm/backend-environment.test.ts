import { afterEach, describe, expect, it, vi } from "vitest";
import { createBackend } from "../../src/llm/create-backend.js";
import type { GenerateRequest } from "../../src/llm/types.js";
import {
  type FakeAnthropic,
  type FakeOpenAI,
  startFakeAnthropic,
  startFakeOpenAI,
  turn,
} from "../../src/testing/index.js";
import { anthropicFixture } from "../support/fixtures.js";

/**
 * `createBackend` is handed an environment and the backends read nothing else. The bug
 * this pins: the Anthropic backend fell back to the process's ANTHROPIC_API_KEY (and the OpenAI
 * client to OPENAI_API_KEY), so a developer's real key reached a keyless local server.
 */

const request = (model: string): GenerateRequest => ({
  messages: [{ role: "user", content: "Hi" }],
  options: { model },
});

let anthropic: FakeAnthropic | undefined;
let openai: FakeOpenAI | undefined;
afterEach(async () => {
  vi.unstubAllEnvs();
  await anthropic?.close();
  await openai?.close();
  anthropic = undefined;
  openai = undefined;
});

describe("the environment createBackend is handed", () => {
  it("anthropic: a keyless base URL gets no key, even when the process has one", async () => {
    vi.stubEnv("ANTHROPIC_API_KEY", "process-real-key");
    vi.stubEnv("ANTHROPIC_AUTH_TOKEN", "process-real-token");
    vi.stubEnv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/not-this-one");
    anthropic = await startFakeAnthropic([anthropicFixture("text-stream")]);
    const backend = createBackend({ provider: "anthropic", baseUrl: anthropic.url }, {});
    await backend.generateStream(request("claude-haiku-4-5"), {
      onTextDelta: () => {},
      onReasoningDelta: () => {},
    });
    const headers = anthropic.requests[0]?.headers ?? {};
    expect(headers).not.toHaveProperty("authorization");
    expect(headers).not.toHaveProperty("x-api-key");
  });

  it("anthropic: the key and base URL of the environment given are used", async () => {
    vi.stubEnv("ANTHROPIC_API_KEY", "process-real-key");
    anthropic = await startFakeAnthropic([anthropicFixture("text-stream")]);
    const backend = createBackend(
      { provider: "anthropic" },
      { ANTHROPIC_API_KEY: "given-key", ANTHROPIC_BASE_URL: anthropic.url },
    );
    await backend.generateStream(request("claude-haiku-4-5"), {
      onTextDelta: () => {},
      onReasoningDelta: () => {},
    });
    expect(anthropic.requests[0]?.headers.authorization).toBe("Bearer given-key");
  });

  it("openai: a keyless base URL gets the placeholder, never the process's key or base URL", async () => {
    vi.stubEnv("OPENAI_API_KEY", "sk-process-real-key");
    vi.stubEnv("OPENAI_BASE_URL", "http://127.0.0.1:9/not-this-one");
    vi.stubEnv("OPENAI_ORG_ID", "org-process");
    openai = await startFakeOpenAI({ chat: [turn({ text: "hello" })] });
    const backend = createBackend({ provider: "openai-chat", baseUrl: openai.baseUrl }, {});
    const response = await backend.generate(request("gpt-4.1-mini"));
    expect(response.content).toBe("hello");
    const headers = openai.requestsTo("chat")[0]?.headers ?? {};
    expect(headers.authorization).toBe("Bearer not-needed");
    expect(headers).not.toHaveProperty("openai-organization");
  });
});
