/**
 * agentloop's public API (the `agentloop` package export): build agents and tools in code, serve
 * them on a bus, read their events. Everything here follows semver from 1.0; in 0.x a minor
 * version may break it (said in the release notes). Test helpers are in `agentloop/testing`.
 *
 * @packageDocumentation
 */

/** The zod this package validates with: tool parameters and config schemas use it (`z.object(…)`). */
export { z } from "zod";

// Agents
export type { Agent, AgentOptions, ChatOptions, ChatResult, CreateAgentParams } from "./agent/agent-types.js";
export { ChatCancelledError, ChatFailedError } from "./agent/chat-errors.js";
export { createAgent } from "./agent/create-agent.js";
// The bus
export type { Bus, BusMessage, RequestOptions, SubscribeOptions, Subscription } from "./bus/bus.js";
export {
  BusClosedError,
  BusConfigError,
  BusError,
  BusTimeoutError,
  InvalidSubjectError,
  NoRespondersError,
} from "./bus/bus-errors.js";
export {
  ChatReply,
  ChatRequest,
  ControlReply,
  ControlRequest,
  ErrorCode,
  ReplyError,
  ReplyUsage,
} from "./bus/contract.js";
export { LocalBus, type LocalBusOptions } from "./bus/local-bus.js";
export { NatsBus, type NatsBusOptions } from "./bus/nats-bus.js";
export {
  allEventsPattern,
  chatSubject,
  controlSubject,
  DEFAULT_PREFIX,
  eventSubject,
  sessionEventsPattern,
} from "./bus/subjects.js";
// The host and its configuration
export { AgentConfig, AgentloopConfig, defineConfig } from "./config/agent-config.js";
export { AgentDefinition, AgentDefinitionsError, AgentsFile } from "./config/agent-definitions.js";
export { ConfigFileError } from "./config/config-file-error.js";
// Conversation histories
export type { ContextHistory } from "./context/context-history.js";
export {
  CorruptHistoryError,
  HistoryConflictError,
  HistoryError,
  HistorySchemaVersionError,
} from "./context/history-errors.js";
export { InMemoryContextHistory } from "./context/in-memory-history.js";
export type { NatsContextHistory } from "./context/nats-context-history.js";
export { NatsHistoryStore } from "./context/nats-history-store.js";
// Errors: one hierarchy, its codes, and errors as data
export {
  AgentloopError,
  type AgentloopErrorCode,
  ConfigurationError,
  ERROR_CODE_TABLE,
  type ErrorInfo,
  isAgentloopError,
  toErrorInfo,
} from "./errors/index.js";
export {
  EVENT_BODY_SCHEMAS,
  /** @deprecated Use EventEnvelope. */
  EventEnvelope as AgentEventEnvelope,
  EventEnvelope,
} from "./events/event-schemas.js";
export { type ParsedEvent, parseAgentEvent, parseEvent, parseEventJson } from "./events/parse-event.js";
// Events
export {
  type AgentEvent,
  type CompactionPhase,
  EVENT_KINDS,
  type EventBase,
  type EventBody,
  type EventKind,
  type EventListener,
  type EventOf,
  type UnknownEvent,
} from "./events/types.js";
export { type RunningHost, type StartHostOptions, startHost } from "./host/start-host.js";
// Models
export {
  type BackendConfig,
  createBackend,
  type ProviderEnvironment,
  ProviderName,
} from "./llm/create-backend.js";
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
} from "./llm/errors.js";
export type { LlmClient } from "./llm/llm-client.js";
export { RetryingLlmClient, type RetryingLlmClientOptions } from "./llm/retrying-client.js";
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
  TokenUsage,
  ToolCall,
  ToolDefinition,
} from "./llm/types.js";
// Tools
export { type CreateToolSetParams, createToolSet, type StatefulToolSet } from "./tools/create-tool-set.js";
export { type DefineToolParams, defineTool, type Tool } from "./tools/define-tool.js";
export { ToolArgumentsError, ToolCancelledError, ToolError, ToolNotFoundError } from "./tools/tool-errors.js";
export type { ToolContext, ToolSet } from "./tools/tool-set.js";

/** This package's version (from its package.json). */
export { VERSION } from "./version.js";
