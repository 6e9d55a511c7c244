import {
  APIConnectionError,
  APIConnectionTimeoutError,
  APIError,
  APIUserAbortError,
} from "@anthropic-ai/sdk";
import { describe, expect, it } from "vitest";
import { mapAnthropicError } from "../../../src/llm/anthropic/map-anthropic-error.js";
import {
  AuthenticationError,
  CancelledError,
  ContextLengthExceededError,
  InvalidResponseError,
  NetworkError,
  RateLimitError,
  RequestTimeoutError,
  ServerError,
} from "../../../src/llm/errors.js";

/** An APIError as the SDK builds it for an SSE `error` event: no status, the event's body. */
function streamError(type: string, message: string): APIError {
  return new APIError(undefined, { type: "error", error: { type, message } }, undefined, new Headers(), null);
}

describe("mapAnthropicError", () => {
  it("maps SDK transport errors", () => {
    expect(mapAnthropicError(new APIUserAbortError())).toBeInstanceOf(CancelledError);
    expect(mapAnthropicError(new APIConnectionTimeoutError())).toBeInstanceOf(RequestTimeoutError);
    expect(mapAnthropicError(new APIConnectionError({ message: "refused" }))).toBeInstanceOf(NetworkError);
  });

  it("reports any error as a cancellation once the caller's signal is aborted", () => {
    const controller = new AbortController();
    controller.abort();
    expect(mapAnthropicError(new TypeError("terminated"), controller.signal)).toBeInstanceOf(CancelledError);
  });

  it("classes an SSE error event by its error type", () => {
    expect(mapAnthropicError(streamError("overloaded_error", "Overloaded"))).toBeInstanceOf(ServerError);
    expect(mapAnthropicError(streamError("api_error", "boom"))).toBeInstanceOf(ServerError);
    expect(mapAnthropicError(streamError("some_new_error", "?"))).toBeInstanceOf(ServerError);
    expect(mapAnthropicError(streamError("rate_limit_error", "slow"))).toBeInstanceOf(RateLimitError);
    expect(mapAnthropicError(streamError("invalid_request_error", "prompt is too long"))).toBeInstanceOf(
      ContextLengthExceededError,
    );
    expect(mapAnthropicError(streamError("overloaded_error", "Overloaded")).statusCode).toBeUndefined();
  });

  it("maps malformed JSON to InvalidResponseError and socket failures to NetworkError", () => {
    expect(mapAnthropicError(new SyntaxError("Unexpected end of JSON input"))).toBeInstanceOf(
      InvalidResponseError,
    );
    expect(mapAnthropicError(new TypeError("terminated"))).toBeInstanceOf(NetworkError);
  });

  it("maps the SDK's missing-credentials error to AuthenticationError", () => {
    const error = new Error("Could not resolve authentication method. Expected one of apiKey, authToken …");
    expect(mapAnthropicError(error)).toBeInstanceOf(AuthenticationError);
  });

  it("passes an LlmError through unchanged", () => {
    const error = new ServerError("already mapped");
    expect(mapAnthropicError(error)).toBe(error);
  });
});
