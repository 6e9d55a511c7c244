import { z } from "zod";
import { ConfigurationError } from "../errors/configuration-error.js";
import { AnthropicBackend } from "./anthropic/anthropic-backend.js";
import { DemoBackend } from "./demo/demo-backend.js";
import { missingApiKeyError } from "./missing-api-key.js";
import { OpenAIChatBackend } from "./openai-chat/openai-chat-backend.js";
import { OpenAIResponsesBackend } from "./openai-responses/openai-responses-backend.js";
import type { ProviderEnvironment } from "./provider-environment.js";
import type { LlmBackend } from "./types.js";

/** The providers a user can choose (`--provider`, `AGENTLOOP_PROVIDER`, an agent file's `provider`). */
export const ProviderName = z.enum(["anthropic", "openai-chat", "openai-responses", "demo"]);
export type ProviderName = z.infer<typeof ProviderName>;

export type { ProviderEnvironment } from "./provider-environment.js";

/** Which provider to build, and how to reach it. */
export interface BackendConfig {
  /** `anthropic`, `openai-chat` (any OpenAI-compatible server), `openai-responses`, or the offline `demo`. */
  provider: ProviderName;
  /** The provider's API key. @defaultValue `ANTHROPIC_API_KEY` / `OPENAI_API_KEY` from `env` */
  apiKey?: string;
  /**
   * The provider's base URL; a keyless local server (vLLM, llama.cpp, Ollama) needs only this.
   * @defaultValue `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` from `env`, else the provider's own
   */
  baseUrl?: string;
}

const KEY_VARIABLE = { anthropic: "ANTHROPIC_API_KEY", openai: "OPENAI_API_KEY" } as const;
const BASE_URL_VARIABLE = { anthropic: "ANTHROPIC_BASE_URL", openai: "OPENAI_BASE_URL" } as const;

/**
 * Builds the backend for a provider: one request, one attempt, in the provider's wire format. Put
 * it behind a `RetryingLlmClient` for an agent (`createAgent({ llm })`). The key and base URL come
 * from `config`, else from the provider's usual environment variables in `env` (the library reads
 * no environment it is not handed: pass `process.env` to use the process's).
 *
 * @param config The provider, and optionally its key and base URL.
 * @param env Where `ANTHROPIC_API_KEY`, `OPENAI_BASE_URL`… are read. @defaultValue `{}`
 * @returns The backend; its `provider` names it.
 * @throws ConfigurationError when a hosted provider has neither an API key nor a base URL.
 *
 * @example
 * ```ts
 * import { createBackend, RetryingLlmClient } from "agentloop";
 *
 * // Keys from the environment, as the CLI reads them.
 * const claude = createBackend({ provider: "anthropic" }, process.env);
 * // A local OpenAI-compatible server (Ollama) needs no key.
 * const local = createBackend({ provider: "openai-chat", baseUrl: "http://127.0.0.1:11434/v1" });
 * const llm = new RetryingLlmClient({ backend: claude, maxAttempts: 5 });
 * llm.setBackend(local); // later requests go to the local server
 * ```
 */
export function createBackend(config: BackendConfig, env: ProviderEnvironment = {}): LlmBackend {
  const provider = parseProvider(config.provider, "provider");
  if (provider === "demo") return new DemoBackend();
  const family = provider === "anthropic" ? "anthropic" : "openai";
  const apiKey = nonEmpty(config.apiKey) ?? nonEmpty(env[KEY_VARIABLE[family]]);
  const baseUrl = nonEmpty(config.baseUrl) ?? nonEmpty(env[BASE_URL_VARIABLE[family]]);
  if (apiKey === undefined && baseUrl === undefined) {
    throw missingApiKeyError(provider, KEY_VARIABLE[family]);
  }
  // The environment goes along: the backends read nothing else (not the process's).
  const options = { apiKey, baseUrl, env };
  if (provider === "anthropic") return new AnthropicBackend(options);
  if (provider === "openai-chat") return new OpenAIChatBackend(options);
  return new OpenAIResponsesBackend(options);
}

/**
 * Which provider to use: the `--provider` flag, else `AGENTLOOP_PROVIDER`; without
 * either, anthropic when `ANTHROPIC_API_KEY` is set, else openai-chat when `OPENAI_API_KEY` is set,
 * else the offline demo model.
 *
 * @throws ConfigurationError for a provider name that is not one of {@link ProviderName}.
 */
export function resolveProvider(env: ProviderEnvironment, flags: { provider?: string } = {}): ProviderName {
  const flag = nonEmpty(flags.provider);
  if (flag !== undefined) return parseProvider(flag, "--provider");
  const variable = nonEmpty(env.AGENTLOOP_PROVIDER);
  if (variable !== undefined) return parseProvider(variable, "AGENTLOOP_PROVIDER");
  if (nonEmpty(env.ANTHROPIC_API_KEY) !== undefined) return "anthropic";
  if (nonEmpty(env.OPENAI_API_KEY) !== undefined) return "openai-chat";
  return "demo";
}

/** Context windows of well-known model families, in tokens. */
const CONTEXT_WINDOWS: ReadonlyArray<readonly [RegExp, number]> = [
  [/^claude-/, 200_000],
  [/^gpt-4\.1(?:-|$)/, 1_047_576],
  [/^gpt-4o(?:-|$)/, 128_000],
  [/^gpt-5/, 400_000],
  [/^o[34](?:-|$)/, 200_000],
  [/^deepseek/, 128_000],
];

/**
 * The context window of a well-known model, or `undefined` when the model is not in the table (the
 * CLI then uses 128,000). A router prefix such as `anthropic/` is ignored.
 */
export function knownContextWindow(model: string): number | undefined {
  const name = model.trim().toLowerCase().split("/").at(-1) ?? "";
  return CONTEXT_WINDOWS.find(([pattern]) => pattern.test(name))?.[1];
}

function parseProvider(value: string, source: string): ProviderName {
  const parsed = ProviderName.safeParse(value.trim());
  if (parsed.success) return parsed.data;
  throw new ConfigurationError(
    `unknown provider "${value}" (from ${source}): expected one of ${ProviderName.options.join(", ")}`,
  );
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}
