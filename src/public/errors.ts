/**
 * `agentloop/errors`: every error agentloop throws, the table of their codes, and errors as data.
 *
 * Every error is an {@link AgentloopError} with a stable `code`; catch by class
 * (`error instanceof RateLimitError`) or by code (`isAgentloopError(error) && error.code === "rate_limit"`).
 * {@link mappingOf} says what a code becomes in a NATS reply and as the CLI's exit code.
 *
 * @example
 * ```ts
 * import { createAgent } from "agentloop";
 * import { ChatFailedError, describeError, mappingOf } from "agentloop/errors";
 * import { scriptedModel } from "agentloop/testing";
 *
 * const agent = await createAgent({ llm: scriptedModel([{ text: "hi" }]), model: "any" });
 * try {
 *   console.log((await agent.chat("hello")).result);
 * } catch (error) {
 *   // A chat failed by a rate limit has the code "rate_limit", retryable: true.
 *   if (error instanceof ChatFailedError && error.retryable) console.error(`try again later (${error.code})`);
 *   else console.error(describeError(error));
 *   if (error instanceof ChatFailedError) process.exitCode = mappingOf(error.code).exitCode;
 * }
 * ```
 *
 * @packageDocumentation
 */

// Chats (what `Agent.chat` rejects with)
export { ChatCancelledError, ChatFailedError } from "../agent/chat-errors.js";
// The bus
export {
  BusClosedError,
  BusConfigError,
  BusError,
  BusTimeoutError,
  InvalidSubjectError,
  NoRespondersError,
} from "../bus/bus-errors.js";
export { NatsPermissionError, PermissionDeniedError } from "../bus/nats-permission-error.js";
// Configuration (the user's mistakes; an agents file's own error, AgentDefinitionsError, is in
// `agentloop` with the file's schema: it is a ConfigurationError like these)
export { ConfigFileError } from "../config/config-file-error.js";
// Conversation histories
export {
  CorruptHistoryError,
  HistoryConflictError,
  HistoryError,
  HistorySchemaVersionError,
} from "../context/history-errors.js";
// The root, the codes and errors as data
export { AgentloopError, type AgentloopErrorOptions, isAgentloopError } from "../errors/agentloop-error.js";
export { BudgetExceededError } from "../errors/budget-exceeded-error.js";
export { ConfigurationError } from "../errors/configuration-error.js";
export { describeError } from "../errors/describe-error.js";
export {
  AGENTLOOP_ERROR_CODES,
  type AgentloopErrorCode,
  ERROR_CODE_TABLE,
  type ErrorCodeMapping,
  EXIT_CANCELLED,
  EXIT_FAILURE,
  EXIT_USER_MISTAKE,
  exitCodeOfReply,
  isAgentloopErrorCode,
  mappingOf,
} from "../errors/error-code.js";
export { type ErrorInfo, errorInfo, isErrorInfo, toErrorInfo } from "../errors/error-info.js";
export { ForbiddenError } from "../errors/forbidden-error.js";
export { InternalError } from "../errors/internal-error.js";
export { UnknownAgentError } from "../errors/unknown-agent-error.js";
// Model requests
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
// Tools
export {
  BackgroundTaskCancelledError,
  ToolArgumentsError,
  ToolCancelledError,
  ToolError,
  ToolNotFoundError,
} from "../tools/tool-errors.js";
