import { readFileSync } from "node:fs";
import {
  type FakeHttpServer,
  type FakeResponse,
  type FakeRoute,
  type RecordedRequest,
  startFakeHttpServer,
} from "./fake-http-server.js";

/**
 * A fake Anthropic Messages API for wire tests: the real `@anthropic-ai/sdk` talks to it over
 * HTTP. `POST /v1/messages` is answered by a script (a list of replies, one per request, or a
 * route); replies are built from transcript fixtures in `test/fixtures/anthropic/` (`.sse`: SSE
 * frames exactly as Anthropic sends them, `event: <type>\ndata: <json>\n\n`; `.json`: a
 * non-streaming response body) or from events and errors built in the test.
 */

const FIXTURES = new URL("../fixtures/anthropic/", import.meta.url);

/** One streamed event; its `type` is also the SSE event name (as Anthropic sends it). */
export interface AnthropicEvent {
  type: string;
  [field: string]: unknown;
}

/** SSE frames for events, one event per frame: `event: <type>\ndata: <json>\n\n`. */
export function anthropicSse(events: readonly AnthropicEvent[]): string[] {
  return events.map((event) => anthropicSseFrame(event.type, JSON.stringify(event)));
}

/** One raw frame, `data` as given (to inject malformed JSON). */
export function anthropicSseFrame(eventName: string, data: string): string {
  return `event: ${eventName}\ndata: ${data}\n\n`;
}

/** The frames of `test/fixtures/anthropic/<name>.sse`, in order. */
export function loadAnthropicTranscript(name: string): string[] {
  const text = readFileSync(new URL(`${name}.sse`, FIXTURES), "utf8");
  return text.split(/(?<=\n\n)/).filter((frame) => frame.trim() !== "");
}

/** The parsed body of `test/fixtures/anthropic/<name>.json` (a non-streaming response). */
export function loadAnthropicMessage(name: string): unknown {
  return JSON.parse(readFileSync(new URL(`${name}.json`, FIXTURES), "utf8"));
}

/** A streamed reply from a transcript fixture name or from frames. */
export function anthropicStream(
  transcript: string | string[],
  options: { cutAfter?: number; delayMs?: number; headers?: Record<string, string> } = {},
): FakeResponse {
  const frames = typeof transcript === "string" ? loadAnthropicTranscript(transcript) : transcript;
  return { type: "sse", frames, ...options };
}

/** A non-streaming reply from a `.json` fixture name or a body. */
export function anthropicMessage(message: string | Record<string, unknown>): FakeResponse {
  return { type: "json", body: typeof message === "string" ? loadAnthropicMessage(message) : message };
}

/**
 * An error reply as Anthropic sends it: `{type: "error", error: {type, message}, request_id}`.
 * @see https://docs.anthropic.com/en/api/errors
 */
export function anthropicError(
  status: number,
  errorType: string,
  message: string,
  headers: Record<string, string> = {},
): FakeResponse {
  return {
    type: "json",
    status,
    headers: { "request-id": "req_fake", ...headers },
    body: { type: "error", error: { type: errorType, message }, request_id: "req_fake" },
  };
}

export interface FakeAnthropic extends FakeHttpServer {
  /** Parsed JSON bodies of the `/v1/messages` requests, in order. */
  bodies(): Record<string, unknown>[];
}

/**
 * Starts the fake. With a list, request N gets reply N; a request beyond the list gets a 500
 * naming the problem (so a test that makes too many requests fails loudly). Any other path gets
 * a 404 `not_found_error`.
 */
export async function startFakeAnthropic(
  script: readonly FakeResponse[] | FakeRoute,
): Promise<FakeAnthropic> {
  let messageRequests = 0;
  const route = async (request: RecordedRequest, index: number): Promise<FakeResponse> => {
    if (request.method !== "POST" || request.path.split("?")[0] !== "/v1/messages") {
      return anthropicError(
        404,
        "not_found_error",
        `fake-anthropic: no route for ${request.method} ${request.path}`,
      );
    }
    const n = messageRequests++;
    if (typeof script === "function") return script(request, index);
    return (
      script[n] ?? anthropicError(500, "api_error", `fake-anthropic: no reply scripted for request ${n + 1}`)
    );
  };
  const server = await startFakeHttpServer(route);
  return {
    ...server,
    bodies: () =>
      server.requests
        .filter((request) => request.path.startsWith("/v1/messages"))
        .map((request) => request.body as Record<string, unknown>),
  };
}
