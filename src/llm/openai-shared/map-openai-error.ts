import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import { describeError } from "../../errors/describe-error.js";
import {
  CancelledError,
  ContextLengthExceededError,
  errorFromStatus,
  InvalidResponseError,
  isLlmError,
  type LlmError,
  NetworkError,
  parseRetryAfter,
  RequestTimeoutError,
} from "../errors.js";
import { errorFromProviderError, type ProviderErrorBody } from "./error-from-provider-error.js";

/** Socket-level failures undici reports (as the error or its cause) when a connection breaks. */
const NETWORK_CODES = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);

function isNetworkFailure(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > 3) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string" && NETWORK_CODES.has(code)) return true;
  // undici: a body cut mid-way is `TypeError: terminated`, a failed connect `TypeError: fetch failed`.
  if (error instanceof TypeError && /^(terminated|fetch failed)$/.test(error.message)) return true;
  return isNetworkFailure(error.cause, depth + 1);
}

function providerBody(error: APIError): ProviderErrorBody {
  const body = error.error;
  return typeof body === "object" && body !== null ? (body as ProviderErrorBody) : {};
}

/**
 * Turns whatever the SDK (or the stream under it) threw into an {@link LlmError}.
 *
 * `stopError` is the request's own verdict when its deadline or the caller stopped it: after an
 * abort the SDK throws assorted errors (or none), and the reason we aborted is the truth.
 *
 * Decisions: a chunk that is not JSON (`SyntaxError` from the SDK's parser) is an
 * {@link InvalidResponseError} (not retried: the provider answered with something unreadable,
 * and a retry may bill twice); an unrecognised error is also an InvalidResponseError, never a
 * retryable class, so a bug cannot turn into a retry loop.
 */
export function mapOpenAIError(error: unknown, stopError?: LlmError): LlmError {
  if (stopError) return stopError;
  if (isLlmError(error)) return error;
  if (error instanceof APIUserAbortError)
    return new CancelledError("the request was cancelled", { cause: error });
  if (error instanceof APIConnectionTimeoutError)
    return new RequestTimeoutError(error.message, { cause: error });
  if (error instanceof APIConnectionError) return new NetworkError(error.message, { cause: error });
  if (error instanceof APIError) {
    const body = providerBody(error);
    const message = body.message || error.message;
    const options = { cause: error, retryAfterMs: parseRetryAfter(error.headers) };
    if (error.status === undefined) return errorFromProviderError(body, options);
    if (body.code === "context_length_exceeded") {
      return new ContextLengthExceededError(message, { ...options, statusCode: error.status });
    }
    return errorFromStatus(error.status, message, options);
  }
  if (isNetworkFailure(error)) {
    return new NetworkError(`the connection to the model broke: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (error instanceof SyntaxError) {
    return new InvalidResponseError(`the model sent a chunk that is not JSON: ${error.message}`, {
      cause: error,
    });
  }
  const message = describeError(error);
  return new InvalidResponseError(`unexpected failure talking to the model: ${message}`, { cause: error });
}
