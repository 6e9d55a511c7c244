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
 * route); replies are SSE frames exactly as Anthropic sends them (`event: <type>\ndata: <json>\n\n`,
 * e.g. read from a transcript with {@link parseSseFrames}), JSON bodies, or errors.
 */

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

/** A streamed reply from SSE frames; `cutAfter` / `delayMs` as in {@link FakeResponse}. */
export function anthropicStream(
  frames: readonly string[],
  options: { cutAfter?: number; delayMs?: number; headers?: Record<string, string> } = {},
): FakeResponse {
  return { type: "sse", frames: [...frames], ...options };
}

/** A non-streaming reply: a Messages API response body. */
export function anthropicMessage(message: unknown): FakeResponse {
  return { type: "json", body: message };
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

/** A running fake Anthropic server. */
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

/** One scripted model turn, rendered as Anthropic sends it (see {@link anthropicTurnSse}). */
export interface AnthropicTurn {
  /** Text deltas (a string is one delta). */
  text?: string | string[];
  /** Thinking deltas, streamed in a `thinking` block before the text. */
  thinking?: string[];
  toolCalls?: Array<{ id: string; name: string; arguments: string }>;
  usage?: { prompt: number; completion: number; cached?: number };
  model?: string;
}

function anthropicUsage(turn: AnthropicTurn) {
  const usage = turn.usage ?? { prompt: 10, completion: 5 };
  return {
    input_tokens: usage.prompt,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: usage.cached ?? 0,
    output_tokens: usage.completion,
  };
}

function turnTexts(text: AnthropicTurn["text"]): string[] {
  if (text === undefined) return [];
  return typeof text === "string" ? [text] : text;
}

/** The turn's content blocks in a Messages API response. */
function anthropicContent(turn: AnthropicTurn): Array<Record<string, unknown>> {
  const content: Array<Record<string, unknown>> = [];
  if (turn.thinking && turn.thinking.length > 0) {
    content.push({ type: "thinking", thinking: turn.thinking.join(""), signature: "fake-signature" });
  }
  const text = turnTexts(turn.text).join("");
  if (text !== "") content.push({ type: "text", text });
  for (const call of turn.toolCalls ?? []) {
    content.push({
      type: "tool_use",
      id: call.id,
      name: call.name,
      input: JSON.parse(call.arguments || "{}"),
    });
  }
  return content;
}

function stopReason(turn: AnthropicTurn): string {
  return (turn.toolCalls ?? []).length > 0 ? "tool_use" : "end_turn";
}

/**
 * A scripted turn as a Messages API stream, in the order Anthropic sends events: `message_start`,
 * one block per thinking / text / tool call (`content_block_start`, deltas, `content_block_stop`),
 * `message_delta` with the stop reason and usage, `message_stop`.
 * @see https://docs.anthropic.com/en/docs/build-with-claude/streaming
 */
export function anthropicTurnSse(turn: AnthropicTurn): FakeResponse {
  const usage = anthropicUsage(turn);
  const events: AnthropicEvent[] = [
    {
      type: "message_start",
      message: {
        id: "msg_fake",
        type: "message",
        role: "assistant",
        model: turn.model ?? "claude-fake",
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { ...usage, output_tokens: 1 },
      },
    },
  ];
  let index = 0;
  const block = (start: Record<string, unknown>, deltas: Array<Record<string, unknown>>) => {
    events.push(
      { type: "content_block_start", index, content_block: start },
      ...deltas.map((delta) => ({ type: "content_block_delta", index, delta })),
      { type: "content_block_stop", index },
    );
    index += 1;
  };
  if (turn.thinking && turn.thinking.length > 0) {
    block({ type: "thinking", thinking: "", signature: "" }, [
      ...turn.thinking.map((thinking) => ({ type: "thinking_delta", thinking })),
      { type: "signature_delta", signature: "fake-signature" },
    ]);
  }
  const texts = turnTexts(turn.text);
  if (texts.length > 0) {
    block(
      { type: "text", text: "" },
      texts.map((text) => ({ type: "text_delta", text })),
    );
  }
  for (const call of turn.toolCalls ?? []) {
    block({ type: "tool_use", id: call.id, name: call.name, input: {} }, [
      { type: "input_json_delta", partial_json: call.arguments },
    ]);
  }
  events.push(
    {
      type: "message_delta",
      delta: { stop_reason: stopReason(turn), stop_sequence: null },
      usage: { output_tokens: usage.output_tokens },
    },
    { type: "message_stop" },
  );
  return anthropicStream(anthropicSse(events));
}

/** A scripted turn as a non-streaming Messages API response body. */
export function anthropicTurnJson(turn: AnthropicTurn): FakeResponse {
  return anthropicMessage({
    id: "msg_fake",
    type: "message",
    role: "assistant",
    model: turn.model ?? "claude-fake",
    content: anthropicContent(turn),
    stop_reason: stopReason(turn),
    stop_sequence: null,
    usage: anthropicUsage(turn),
  });
}
