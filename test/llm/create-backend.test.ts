import { describe, expect, it } from "vitest";
import { AnthropicBackend } from "../../src/llm/anthropic/anthropic-backend.js";
import { ConfigurationError } from "../../src/llm/configuration-error.js";
import { createBackend, knownContextWindow, resolveProvider } from "../../src/llm/create-backend.js";
import { DemoBackend } from "../../src/llm/demo/demo-backend.js";
import { LlmError } from "../../src/llm/errors.js";
import { OpenAIChatBackend } from "../../src/llm/openai-chat/openai-chat-backend.js";
import { OpenAIResponsesBackend } from "../../src/llm/openai-responses/openai-responses-backend.js";

describe("resolveProvider", () => {
  it("prefers the flag, then AGENTLOOP_PROVIDER, then the keys, then demo", () => {
    const env = { AGENTLOOP_PROVIDER: "openai-responses", ANTHROPIC_API_KEY: "a", OPENAI_API_KEY: "o" };
    expect(resolveProvider(env, { provider: "demo" })).toBe("demo");
    expect(resolveProvider(env, {})).toBe("openai-responses");
    expect(resolveProvider({ ANTHROPIC_API_KEY: "a", OPENAI_API_KEY: "o" }, {})).toBe("anthropic");
    expect(resolveProvider({ OPENAI_API_KEY: "o" })).toBe("openai-chat");
    expect(resolveProvider({})).toBe("demo");
  });

  it("treats empty values as unset", () => {
    expect(
      resolveProvider(
        { AGENTLOOP_PROVIDER: "", ANTHROPIC_API_KEY: " ", OPENAI_API_KEY: "o" },
        { provider: "" },
      ),
    ).toBe("openai-chat");
  });

  it("rejects an unknown provider with a ConfigurationError naming the source and the choices", () => {
    expect(() => resolveProvider({}, { provider: "gemini" })).toThrow(ConfigurationError);
    expect(() => resolveProvider({}, { provider: "gemini" })).toThrow(
      'unknown provider "gemini" (from --provider): expected one of anthropic, openai-chat, openai-responses, demo',
    );
    expect(() => resolveProvider({ AGENTLOOP_PROVIDER: "x" })).toThrow(/from AGENTLOOP_PROVIDER/);
  });
});

describe("createBackend", () => {
  it("builds the demo backend without any key", () => {
    expect(createBackend({ provider: "demo" }, {})).toBeInstanceOf(DemoBackend);
  });

  it("builds each hosted backend from a key in the config or the environment", () => {
    const anthropic = createBackend({ provider: "anthropic", apiKey: "sk-ant" }, {});
    expect(anthropic).toBeInstanceOf(AnthropicBackend);
    expect(anthropic.provider).toBe("anthropic");
    expect(createBackend({ provider: "anthropic" }, { ANTHROPIC_API_KEY: "sk-ant" })).toBeInstanceOf(
      AnthropicBackend,
    );
    expect(createBackend({ provider: "openai-chat" }, { OPENAI_API_KEY: "sk" })).toBeInstanceOf(
      OpenAIChatBackend,
    );
    expect(createBackend({ provider: "openai-responses", apiKey: "sk" }, {})).toBeInstanceOf(
      OpenAIResponsesBackend,
    );
  });

  it("accepts a base URL without a key (a keyless local server)", () => {
    const backend = createBackend({ provider: "openai-chat", baseUrl: "http://127.0.0.1:8000/v1" }, {});
    expect(backend).toBeInstanceOf(OpenAIChatBackend);
    expect(
      createBackend({ provider: "openai-chat" }, { OPENAI_BASE_URL: "http://127.0.0.1:1/v1" }),
    ).toBeInstanceOf(OpenAIChatBackend);
  });

  it("refuses a hosted provider with no key and no base URL with a one-line ConfigurationError", () => {
    for (const provider of ["anthropic", "openai-chat", "openai-responses"] as const) {
      let thrown: unknown;
      try {
        createBackend({ provider, apiKey: "" }, { ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "" });
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ConfigurationError);
      expect(thrown).not.toBeInstanceOf(LlmError);
      const message = (thrown as Error).message;
      expect(message).not.toContain("\n");
      expect(message).toContain(provider === "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
    }
  });
});

describe("knownContextWindow", () => {
  it.each([
    ["claude-sonnet-4-5", 200_000],
    ["anthropic/claude-3-5-haiku-latest", 200_000],
    ["gpt-4o", 128_000],
    ["gpt-4o-mini", 128_000],
    ["gpt-4.1", 1_047_576],
    ["gpt-4.1-nano", 1_047_576],
    ["gpt-5", 400_000],
    ["gpt-5-mini", 400_000],
    ["o3", 200_000],
    ["o4-mini", 200_000],
    ["deepseek-chat", 128_000],
    ["DeepSeek-Reasoner", 128_000],
  ])("%s → %i", (model, window) => {
    expect(knownContextWindow(model)).toBe(window);
  });

  it.each(["llama3.1:8b", "gpt-4", "gpt-4.10", "o1", "o35", "demo", ""])("%s is unknown", (model) => {
    expect(knownContextWindow(model)).toBeUndefined();
  });
});
