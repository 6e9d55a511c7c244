import {
  ContextLengthExceededError,
  InvalidRequestError,
  isContextLengthMessage,
  type LlmError,
  type LlmErrorOptions,
  RateLimitError,
  ServerError,
} from "../errors.js";

/** The error object OpenAI puts in a body, an SSE `error` event or a failed response. */
export interface ProviderErrorBody {
  code?: string | null;
  type?: string | null;
  message?: string | null;
}

/**
 * Maps an error that arrived without an HTTP status (inside a 200 stream: a chat chunk with an
 * `error` field, a Responses `error` event, `response.failed`) by its code. Anything not known to
 * be the caller's fault is a {@link ServerError}, which the client retries.
 *
 * @see https://platform.openai.com/docs/api-reference/responses/object#responses/object-error
 */
export function errorFromProviderError(body: ProviderErrorBody, options: LlmErrorOptions = {}): LlmError {
  const code = body.code ?? "";
  const message = body.message || code || "the provider reported an error";
  if (code === "context_length_exceeded" || isContextLengthMessage(message)) {
    return new ContextLengthExceededError(message, options);
  }
  if (code === "rate_limit_exceeded" || body.type === "rate_limit_error")
    return new RateLimitError(message, options);
  if (/invalid|image/.test(code) || body.type === "invalid_request_error") {
    return new InvalidRequestError(message, options);
  }
  return new ServerError(message, options);
}
