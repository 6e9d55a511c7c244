/**
 * The bus: one interface, two transports (a real nats-server, or in-process), the v1 subject
 * layout and payload schemas, and the JetStream event log.
 */
export type { Bus, BusMessage, RequestOptions, SubscribeOptions, Subscription } from "./bus.js";
export { DEFAULT_REQUEST_TIMEOUT_MS, type HandlerErrorReporter } from "./bus-defaults.js";
export {
  BusClosedError,
  BusConfigError,
  BusError,
  BusTimeoutError,
  InvalidSubjectError,
  NoRespondersError,
} from "./bus-errors.js";
export {
  ChatReply,
  ChatRequest,
  type ChatRequestInput,
  CONTROL_COMMANDS,
  ControlReply,
  ControlRequest,
  ERROR_CODES,
  ErrorCode,
  errorReply,
  MAX_PAYLOAD_BYTES,
  type ParseResult,
  parseChatReply,
  parseChatRequest,
  parseControlReply,
  parseControlRequest,
  ReplyError,
  ReplyUsage,
} from "./contract.js";
export {
  DEFAULT_EVENT_MAX_AGE_MS,
  type EnsureEventStreamOptions,
  EVENT_STREAM_NAME,
  ensureEventStream,
  eventStreamName,
  type ReplayEventsOptions,
  type ReplayStart,
  replayEvents,
  type StoredEvent,
} from "./event-log.js";
export { LocalBus, type LocalBusOptions } from "./local-bus.js";
export { NatsBus, type NatsBusOptions } from "./nats-bus.js";
export { type NatsAddress, parseNatsUrl, redactNatsUrl } from "./nats-url.js";
export {
  type AgentVerb,
  agentRequestsPattern,
  allEventsPattern,
  chatSubject,
  controlSubject,
  DEFAULT_PREFIX,
  eventSubject,
  isValidName,
  isValidPattern,
  isValidPrefix,
  isValidSubject,
  jetStreamName,
  NAME_PATTERN,
  parseAgentSubject,
  sessionEventsPattern,
  subjectMatches,
} from "./subjects.js";
