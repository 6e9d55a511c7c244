import {
  AnthropicError,
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from "@anthropic-ai/sdk";
import { describeError } from "../../errors/describe-error.js";
import {
  AuthenticationError,
  CancelledError,
  ContextLengthExceededError,
  errorFromStatus,
  InvalidRequestError,
  InvalidResponseError,
  isContextLengthMessage,
  isLlmError,
  type LlmError,
  ModelNotFoundError,
  NetworkError,
  parseRetryAfter,
  RateLimitError,
  RequestTimeoutError,
  ServerError,
} from "../errors.js";

/**
 * Anything the SDK (or the stream under it) threw → an {@link LlmError}.
 *
 * - an `APIError` with an HTTP status → {@link errorFromStatus} (the one place statuses become
 *   classes), with the server's retry-after and its `error.message` (context-length detection
 *   reads it);
 * - an `APIError` without a status is an SSE `error` event mid-stream: classed by its
 *   `error.type` like the matching status (`overloaded_error`, `api_error`, `timeout_error` and
 *   unknown types → {@link ServerError});
 * - `APIUserAbortError`, or any error once `signal` is aborted → {@link CancelledError};
 *   `APIConnectionTimeoutError` → {@link RequestTimeoutError}; `APIConnectionError` and errors
 *   from reading the body (socket closed, `terminated`) → {@link NetworkError};
 * - a `SyntaxError` is a frame or body that is not JSON → {@link InvalidResponseError}: not
 *   retried, since what the provider sends is not something a second attempt is known to fix;
 * - no credentials → {@link AuthenticationError}; other SDK errors (client-side checks) →
 *   {@link InvalidRequestError}.
 *
 * @see https://docs.anthropic.com/en/api/errors
 */
export function mapAnthropicError(error: unknown, signal?: AbortSignal): LlmError {
  if (isLlmError(error)) return error;
  const options = { cause: error };
  if (signal?.aborted || error instanceof APIUserAbortError) {
    return new CancelledError("anthropic: the request was cancelled", options);
  }
  if (error instanceof APIConnectionTimeoutError)
    return new RequestTimeoutError(`anthropic: ${error.message}`, options);
  if (error instanceof APIConnectionError) return new NetworkError(`anthropic: ${error.message}`, options);
  if (error instanceof APIError) {
    const message = error.apiMessage ?? error.message;
    if (error.status !== undefined) {
      const retryAfterMs = parseRetryAfter(error.headers);
      return errorFromStatus(error.status, `anthropic: ${message}`, { cause: error, retryAfterMs });
    }
    return fromStreamErrorType(error.type, message, error);
  }
  if (error instanceof SyntaxError) {
    return new InvalidResponseError(`anthropic: the response is not valid JSON: ${error.message}`, options);
  }
  if (error instanceof AnthropicError) return new InvalidRequestError(`anthropic: ${error.message}`, options);
  // The SDK throws a plain Error when it finds no credential at all (no key, token or profile).
  if (error instanceof Error && /could not resolve authentication/i.test(error.message)) {
    return new AuthenticationError(`anthropic: ${error.message}`, options);
  }
  const message = describeError(error);
  return new NetworkError(`anthropic: the connection failed: ${message}`, options);
}

/** An SSE `error` event's `error.type` → class (no HTTP status: the stream itself was a 200). */
function fromStreamErrorType(type: string | null, message: string, cause: unknown): LlmError {
  const text = `anthropic: ${message}`;
  const options = { cause };
  switch (type) {
    case "rate_limit_error":
      return new RateLimitError(text, options);
    case "invalid_request_error":
      return isContextLengthMessage(message)
        ? new ContextLengthExceededError(text, options)
        : new InvalidRequestError(text, options);
    case "authentication_error":
    case "permission_error":
      return new AuthenticationError(text, options);
    case "not_found_error":
      return new ModelNotFoundError(text, options);
    default:
      return new ServerError(text, options);
  }
}
