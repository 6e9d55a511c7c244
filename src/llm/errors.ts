import { AgentloopError } from "../errors/agentloop-error.js";

/**
 * The LLM layer's part of the error hierarchy. `retryable` says whether the retrying client may
 * try again; HTTP statuses are mapped to classes in one place ({@link errorFromStatus}).
 */

export type LlmErrorCode =
  | "rate_limit"
  | "server_error"
  | "network"
  | "stray_tool_markup"
  | "authentication"
  | "not_found"
  | "invalid_request"
  | "timeout"
  | "invalid_response"
  | "context_length_exceeded"
  | "cancelled";

export interface LlmErrorOptions {
  cause?: unknown;
  statusCode?: number;
  retryAfterMs?: number;
}

/** Base of every LLM error. `status` and `statusCode` are the same HTTP status. */
export abstract class LlmError extends AgentloopError {
  abstract override readonly code: LlmErrorCode;
  readonly statusCode: number | undefined;
  readonly retryAfterMs: number | undefined;

  constructor(message: string, options: LlmErrorOptions = {}) {
    super(message, {
      ...(options.cause === undefined ? {} : { cause: options.cause }),
      ...(options.statusCode === undefined ? {} : { status: options.statusCode }),
    });
    this.statusCode = options.statusCode;
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** 429: carries the server's retry-after when it sent one. */
export class RateLimitError extends LlmError {
  readonly code = "rate_limit";
  readonly retryable = true;
}
/** 5xx, 529 overloaded, or an SSE `error` event from the provider. */
export class ServerError extends LlmError {
  readonly code = "server_error";
  readonly retryable = true;
}
/** Connection refused or reset, a stream cut mid-way. */
export class NetworkError extends LlmError {
  readonly code = "network";
  readonly retryable = true;
}
/** The model wrote a tool call as text instead of calling the tool. */
export class StrayToolMarkupError extends LlmError {
  readonly code = "stray_tool_markup";
  readonly retryable = true;
}
/** The provider refused the credentials (401 / 403). Not retried. */
export class AuthenticationError extends LlmError {
  readonly code = "authentication";
  readonly retryable = false;
}
/** The provider does not know the model (404). Not retried. */
export class ModelNotFoundError extends LlmError {
  readonly code = "not_found";
  readonly retryable = false;
}
/** The provider refused the request (any other 4xx, e.g. 400 or 422). Not retried. */
export class InvalidRequestError extends LlmError {
  readonly code = "invalid_request";
  readonly retryable = false;
}
/** Time to first byte or total time exceeded. Never retried: a retry may bill twice. */
export class RequestTimeoutError extends LlmError {
  readonly code = "timeout";
  readonly retryable = false;
}
/** The provider answered with something we cannot parse. */
export class InvalidResponseError extends LlmError {
  readonly code = "invalid_response";
  readonly retryable = false;
}
/** The prompt is over the model's window: the caller must compact, then retry. */
export class ContextLengthExceededError extends LlmError {
  readonly code = "context_length_exceeded";
  readonly retryable = false;
}
/** The caller's AbortSignal fired. Never retried. */
export class CancelledError extends LlmError {
  readonly code = "cancelled";
  readonly retryable = false;
}

const CONTEXT_LENGTH_PATTERNS = [
  /context.?length/i,
  /context window/i,
  /prompt is too long/i,
  /maximum context/i,
  /too many tokens/i,
  /input is too long/i,
  /exceeds? the (?:model'?s? )?(?:maximum|max)/i,
];

/** Context-length errors are recognised by their message (providers use 400 for them). */
export function isContextLengthMessage(message: string): boolean {
  return CONTEXT_LENGTH_PATTERNS.some((pattern) => pattern.test(message));
}

/** Parses a `retry-after` (seconds or HTTP date) or `retry-after-ms` header into milliseconds. */
export function parseRetryAfter(
  headers: { get(name: string): string | null | undefined } | undefined,
  now = Date.now(),
): number | undefined {
  if (!headers) return undefined;
  const ms = headers.get("retry-after-ms");
  if (ms && Number.isFinite(Number(ms))) return Math.max(0, Number(ms));
  const value = headers.get("retry-after");
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** The one place an HTTP status becomes an error class. */
export function errorFromStatus(status: number, message: string, options: LlmErrorOptions = {}): LlmError {
  const withStatus = { ...options, statusCode: status };
  if (isContextLengthMessage(message) && (status === 400 || status === 413 || status === 422)) {
    return new ContextLengthExceededError(message, withStatus);
  }
  if (status === 429) return new RateLimitError(message, withStatus);
  if (status === 401 || status === 403) return new AuthenticationError(message, withStatus);
  if (status === 404) return new ModelNotFoundError(message, withStatus);
  if (status === 408) return new RequestTimeoutError(message, withStatus);
  if (status >= 500) return new ServerError(message, withStatus);
  return new InvalidRequestError(message, withStatus);
}

export function isLlmError(error: unknown): error is LlmError {
  return error instanceof LlmError;
}
