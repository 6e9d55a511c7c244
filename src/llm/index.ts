/**
 * The public LLM API: the common model, the error hierarchy, the retrying client, the backends and
 * the provider factory. Test helpers (the scripted backend: the testing kit in src/testing) and
 * internals (converters, wire schemas, the demo model's reply logic) are deliberately not exported here.
 */

export { ConfigurationError } from "../errors/configuration-error.js";
export { AnthropicBackend, type AnthropicBackendOptions } from "./anthropic/index.js";
export {
  type BackendConfig,
  createBackend,
  knownContextWindow,
  type ProviderEnvironment,
  ProviderName,
  resolveProvider,
} from "./create-backend.js";
export { DemoBackend, type DemoBackendOptions } from "./demo/demo-backend.js";
export {
  AuthenticationError,
  CancelledError,
  ContextLengthExceededError,
  errorFromStatus,
  InvalidRequestError,
  InvalidResponseError,
  isContextLengthMessage,
  isLlmError,
  LlmError,
  type LlmErrorCode,
  type LlmErrorOptions,
  ModelNotFoundError,
  NetworkError,
  parseRetryAfter,
  RateLimitError,
  RequestTimeoutError,
  ServerError,
  StrayToolMarkupError,
} from "./errors.js";
export type { LlmClient } from "./llm-client.js";
export { type OpenAIBackendOptions, OpenAIChatBackend } from "./openai-chat/index.js";
export { OpenAIResponsesBackend } from "./openai-responses/index.js";
export { type RetryInfo, RetryingLlmClient, type RetryingLlmClientOptions } from "./retrying-client.js";
export { findStrayToolMarkup } from "./stray-tool-markup.js";
export {
  addUsage,
  type BackendSink,
  type ContentPart,
  canCallTools,
  createUsage,
  emptyUsage,
  type GenerateRequest,
  type GenerateResponse,
  hasToolTraffic,
  type LlmBackend,
  type LlmOptions,
  type Message,
  type ReasoningEffort,
  type Role,
  type StreamSink,
  type ThinkingBlock,
  type TokenUsage,
  type ToolCall,
  type ToolDefinition,
  textOf,
  withoutTools,
} from "./types.js";
