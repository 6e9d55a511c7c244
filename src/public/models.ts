/**
 * `agentloop/models`: the model side of an agent, for code that builds a backend of its own or
 * drives one directly.
 *
 * An agent talks to an {@link LlmClient}; the one agentloop ships, {@link RetryingLlmClient},
 * retries, resets streams and checks answers in front of one swappable {@link LlmBackend}.
 * {@link createBackend} builds the provider backends (Anthropic, OpenAI Chat, OpenAI Responses, the
 * offline demo); implement `LlmBackend` to bring another. The errors a backend throws are the
 * {@link LlmError} family (also in `agentloop/errors`): the client retries the retryable ones.
 *
 * @example
 * ```ts
 * import { createBackend, RetryingLlmClient } from "agentloop/models";
 *
 * const backend = createBackend({ provider: "anthropic" }, process.env);
 * const llm = new RetryingLlmClient({ backend, maxAttempts: 5 });
 * const answer = await llm.generate({
 *   messages: [{ role: "user", content: "Say hi." }],
 *   options: { model: "claude-sonnet-4-5" },
 * });
 * ```
 *
 * @packageDocumentation
 */

export {
  type BackendConfig,
  createBackend,
  type ProviderEnvironment,
  ProviderName,
} from "../llm/create-backend.js";
export {
  AuthenticationError,
  CancelledError,
  ContextLengthExceededError,
  InvalidRequestError,
  InvalidResponseError,
  LlmError,
  type LlmErrorCode,
  ModelNotFoundError,
  NetworkError,
  RateLimitError,
  RequestTimeoutError,
  ServerError,
  StrayToolMarkupError,
} from "../llm/errors.js";
export type { LlmClient } from "../llm/llm-client.js";
export { type RetryInfo, RetryingLlmClient, type RetryingLlmClientOptions } from "../llm/retrying-client.js";
export type {
  BackendSink,
  ContentPart,
  GenerateRequest,
  GenerateResponse,
  LlmBackend,
  LlmOptions,
  Message,
  ReasoningEffort,
  Role,
  StreamSink,
  TokenUsage,
  ToolCall,
  ToolDefinition,
} from "../llm/types.js";
