import OpenAI from "openai";
import type { ConfigurationError } from "../../errors/configuration-error.js";
import { missingApiKeyError } from "../missing-api-key.js";
import { sdkLogLevel } from "../sdk-log-level.js";

/** How to reach an OpenAI (or OpenAI-compatible) server. Every field is optional. */
export interface OpenAIBackendOptions {
  /** Defaults to `OPENAI_API_KEY`. Keyless servers (vLLM, llama.cpp, Ollama) need only a base URL. */
  apiKey?: string;
  /** e.g. `http://localhost:8000/v1`. Defaults to `OPENAI_BASE_URL`, else the SDK's OpenAI URL. */
  baseUrl?: string;
  defaultHeaders?: Record<string, string>;
  /** Injected for tests and proxies; defaults to the global `fetch`. */
  fetch?: typeof globalThis.fetch;
  /**
   * The only environment the client reads (the SDK is given every value, so it reads none):
   * default the process's. A key missing here never reaches the server, even if the process has one.
   */
  env?: OpenAIEnvironment;
}

/** Where the SDK sends requests when neither the options nor the environment say otherwise. */
const OPENAI_API_URL = "https://api.openai.com/v1";

/** Sent to keyless OpenAI-compatible servers: the SDK refuses to build a client without a key. */
export const PLACEHOLDER_API_KEY = "not-needed";

/** Environment the client reads; a parameter so tests need not touch `process.env`. */
export type OpenAIEnvironment = Record<string, string | undefined>;

/**
 * Builds the SDK client both OpenAI backends use. The SDK's retries are off (`maxRetries: 0`):
 * retrying belongs to the LLM client, which knows about resets and billing. The SDK's own logging
 * is off unless `OPENAI_LOG` asks for it, because every failure it would log reaches the caller
 * as an LlmError anyway (and a malformed chunk would otherwise be printed to the console).
 *
 * @throws {@link ConfigurationError} when there is no API key and no base URL to a keyless server.
 */
export function createOpenAIClient(
  options: OpenAIBackendOptions,
  env: OpenAIEnvironment = options.env ?? {},
): OpenAI {
  const baseURL = options.baseUrl ?? env.OPENAI_BASE_URL;
  const apiKey = options.apiKey ?? env.OPENAI_API_KEY ?? (baseURL ? PLACEHOLDER_API_KEY : undefined);
  if (apiKey === undefined) {
    throw missingApiKeyError("openai", "OPENAI_API_KEY");
  }
  return new OpenAI({
    apiKey,
    // Given explicitly (null for none): left undefined, the SDK reads the process's variables.
    baseURL: baseURL ?? OPENAI_API_URL,
    organization: env.OPENAI_ORG_ID ?? null,
    project: env.OPENAI_PROJECT_ID ?? null,
    maxRetries: 0,
    defaultHeaders: options.defaultHeaders,
    fetch: options.fetch,
    logLevel: sdkLogLevel(env.OPENAI_LOG),
  });
}
