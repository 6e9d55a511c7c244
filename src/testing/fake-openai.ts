/**
 * A fake OpenAI server for wire tests: `/v1/chat/completions` and `/v1/responses` answered from
 * scripts, in the exact SSE shapes OpenAI sends (chat: `data: <json>` frames ending in
 * `data: [DONE]`; Responses: `event: <type>` + `data: <json>` frames with `sequence_number`s).
 *
 * A script entry is either a raw {@link FakeResponse} (a transcript fixture, an error, a cut, a
 * hang) or an {@link OpenAITurn} — "answer with this text / these tool calls" — which the fake
 * renders as a stream or a JSON body depending on the request's `stream` flag, so suites that
 * drive the agent or the CLI can script a conversation in a few lines.
 */
import {
  type FakeHttpServer,
  type FakeResponse,
  type RecordedRequest,
  startFakeHttpServer,
} from "./fake-http-server.js";

/** The two OpenAI endpoints the fake serves: Chat Completions and Responses. */
export type OpenAIEndpoint = "chat" | "responses";

/** A tool call a scripted turn makes. */
export interface OpenAITurnToolCall {
  id: string;
  name: string;
  /** The JSON arguments; streamed in two fragments. */
  arguments: string;
}

/** One scripted model turn, rendered in the wire format of the endpoint it is served on. */
export interface OpenAITurn {
  type: "turn";
  /** Text deltas (a string is one delta). */
  text?: string | string[];
  /** Reasoning deltas: `reasoning_content` on chat, summary text on Responses. */
  reasoning?: string[];
  toolCalls?: OpenAITurnToolCall[];
  usage?: { prompt: number; completion: number; cached?: number };
  model?: string;
}

/** A turn's content without its tag, as the renderers take it. */
export type TurnSpec = Omit<OpenAITurn, "type">;

/** One reply of the fake: a raw response or a scripted turn. */
export type OpenAIReply = FakeResponse | OpenAITurn;

/**
 * How one endpoint answers: a list (the n-th request gets the n-th reply; the last one repeats)
 * or a function of the request and its 0-based index among that endpoint's requests.
 */
export type OpenAIScript =
  | readonly OpenAIReply[]
  | ((request: RecordedRequest, index: number) => OpenAIReply | Promise<OpenAIReply>);

/** The script of each endpoint; an endpoint without one answers 404. */
export interface FakeOpenAIOptions {
  chat?: OpenAIScript;
  responses?: OpenAIScript;
}

/** A running fake OpenAI server. */
export interface FakeOpenAI extends FakeHttpServer {
  /** The base URL to give the SDK: `http://127.0.0.1:PORT/v1`. */
  baseUrl: string;
  /** The requests one endpoint received, in order. */
  requestsTo(endpoint: OpenAIEndpoint): RecordedRequest[];
}

const ENDPOINT_PATHS: Record<OpenAIEndpoint, string> = {
  chat: "/v1/chat/completions",
  responses: "/v1/responses",
};

/** A scripted turn (see {@link OpenAITurn}). */
export function turn(spec: TurnSpec): OpenAITurn {
  return { type: "turn", ...spec };
}

/** One SSE frame: `data: <json>` (strings are sent as they are), with an `event:` line if given. */
export function sseFrame(data: unknown, event?: string): string {
  const payload = typeof data === "string" ? data : JSON.stringify(data);
  return `${event ? `event: ${event}\n` : ""}data: ${payload}\n\n`;
}

/** A chat completion stream: one `data:` frame per chunk, then `data: [DONE]` unless `done: false`. */
export function chatChunksSse(
  chunks: readonly unknown[],
  options: { done?: boolean; cutAfter?: number; delayMs?: number } = {},
): FakeResponse {
  const frames = chunks.map((chunk) => sseFrame(chunk));
  if (options.done !== false) frames.push(sseFrame("[DONE]"));
  const reply: FakeResponse = { type: "sse", frames, delayMs: options.delayMs };
  return options.cutAfter === undefined ? reply : cutAfterFrames(reply, options.cutAfter);
}

/**
 * A Responses event stream: each event framed with its `event:` line; `sequence_number`s are
 * numbered from 0 where an event has none.
 */
export function responsesSse(
  events: ReadonlyArray<{ type: string } & Record<string, unknown>>,
  options: { cutAfter?: number; delayMs?: number } = {},
): FakeResponse {
  const frames = events.map((event, index) =>
    sseFrame({ ...event, sequence_number: event.sequence_number ?? index }, event.type),
  );
  const reply: FakeResponse = { type: "sse", frames, delayMs: options.delayMs };
  return options.cutAfter === undefined ? reply : cutAfterFrames(reply, options.cutAfter);
}

/**
 * The same stream, cut (socket destroyed, no clean end) after its first `frames` frames. The
 * frames are truncated rather than passed as `cutAfter` alone, so they are flushed before the cut.
 */
export function cutAfterFrames(reply: FakeResponse, frames: number): FakeResponse {
  if (reply.type !== "sse") throw new Error("only a stream can be cut");
  return { ...reply, frames: reply.frames.slice(0, frames), cutAfter: frames };
}

/**
 * The same stream, stalled after its first `frames` frames: the connection stays open and silent
 * until the client gives up (a provider that stops mid-answer).
 */
export function stallAfterFrames(reply: FakeResponse, frames: number): FakeResponse {
  if (reply.type !== "sse") throw new Error("only a stream can stall");
  return { ...reply, stallAfter: frames };
}

/** An error response in OpenAI's shape: `{ error: { message, type, param, code } }`. */
export function openAIError(
  status: number,
  message: string,
  options: {
    type?: string;
    code?: string | null;
    param?: string | null;
    headers?: Record<string, string>;
  } = {},
): FakeResponse {
  return {
    type: "json",
    status,
    headers: options.headers,
    body: {
      error: {
        message,
        type: options.type ?? (status >= 500 ? "server_error" : "invalid_request_error"),
        param: options.param ?? null,
        code: options.code ?? null,
      },
    },
  };
}

function textDeltas(text: OpenAITurn["text"]): string[] {
  if (text === undefined) return [];
  return typeof text === "string" ? [text] : text;
}

function splitInTwo(value: string): [string, string] {
  const middle = Math.ceil(value.length / 2);
  return [value.slice(0, middle), value.slice(middle)];
}

const CREATED = 1_750_000_000;

function chatUsage(spec: TurnSpec) {
  const usage = spec.usage ?? { prompt: 10, completion: 5 };
  return {
    prompt_tokens: usage.prompt,
    completion_tokens: usage.completion,
    total_tokens: usage.prompt + usage.completion,
    prompt_tokens_details: { cached_tokens: usage.cached ?? 0, audio_tokens: 0 },
    completion_tokens_details: {
      reasoning_tokens: 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

/** A scripted turn as a Chat Completions stream. */
export function chatTurnSse(spec: TurnSpec): FakeResponse {
  const base = {
    id: "chatcmpl-fake",
    object: "chat.completion.chunk",
    created: CREATED,
    model: spec.model ?? "gpt-fake",
  };
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    usage: null,
  });
  const calls = spec.toolCalls ?? [];
  return chatChunksSse([
    chunk({ role: "assistant", content: "", refusal: null }),
    ...(spec.reasoning ?? []).map((text) => chunk({ reasoning_content: text })),
    ...textDeltas(spec.text).map((text) => chunk({ content: text })),
    ...calls.flatMap((call, index) => [
      chunk({
        tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }],
      }),
      ...splitInTwo(call.arguments).map((part) =>
        chunk({ tool_calls: [{ index, function: { arguments: part } }] }),
      ),
    ]),
    chunk({}, calls.length > 0 ? "tool_calls" : "stop"),
    { ...base, choices: [], usage: chatUsage(spec) },
  ]);
}

/** A scripted turn as a non-streaming `chat.completion` body. */
export function chatTurnJson(spec: TurnSpec): FakeResponse {
  const calls = spec.toolCalls ?? [];
  const reasoning = (spec.reasoning ?? []).join("");
  return {
    type: "json",
    body: {
      id: "chatcmpl-fake",
      object: "chat.completion",
      created: CREATED,
      model: spec.model ?? "gpt-fake",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: textDeltas(spec.text).join("") || null,
            refusal: null,
            ...(reasoning ? { reasoning_content: reasoning } : {}),
            ...(calls.length > 0
              ? {
                  tool_calls: calls.map((call) => ({
                    id: call.id,
                    type: "function",
                    function: { name: call.name, arguments: call.arguments },
                  })),
                }
              : {}),
          },
          logprobs: null,
          finish_reason: calls.length > 0 ? "tool_calls" : "stop",
        },
      ],
      usage: chatUsage(spec),
    },
  };
}

function responsesOutput(spec: TurnSpec): Array<Record<string, unknown>> {
  const output: Array<Record<string, unknown>> = [];
  if (spec.reasoning && spec.reasoning.length > 0) {
    output.push({
      id: "rs_fake",
      type: "reasoning",
      summary: [{ type: "summary_text", text: spec.reasoning.join("") }],
    });
  }
  const text = textDeltas(spec.text).join("");
  if (text !== "") {
    output.push({
      id: "msg_fake",
      type: "message",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", annotations: [], logprobs: [], text }],
    });
  }
  for (const call of spec.toolCalls ?? []) {
    output.push({
      id: `fc_${call.id}`,
      type: "function_call",
      status: "completed",
      arguments: call.arguments,
      call_id: call.id,
      name: call.name,
    });
  }
  return output;
}

function responseObject(spec: TurnSpec, status: string, output: unknown[]) {
  const usage = spec.usage ?? { prompt: 10, completion: 5 };
  return {
    id: "resp_fake",
    object: "response",
    created_at: CREATED,
    status,
    model: spec.model ?? "gpt-fake",
    output,
    store: false,
    usage:
      status === "completed"
        ? {
            input_tokens: usage.prompt,
            input_tokens_details: { cached_tokens: usage.cached ?? 0 },
            output_tokens: usage.completion,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: usage.prompt + usage.completion,
          }
        : null,
  };
}

/** A scripted turn as a Responses event stream, in the order the API sends events. */
export function responsesTurnSse(spec: TurnSpec): FakeResponse {
  const output = responsesOutput(spec);
  const events: Array<{ type: string } & Record<string, unknown>> = [
    { type: "response.created", response: responseObject(spec, "in_progress", []) },
    { type: "response.in_progress", response: responseObject(spec, "in_progress", []) },
  ];
  output.forEach((item, output_index) => {
    const item_id = item.id;
    if (item.type === "reasoning") {
      const text = (spec.reasoning ?? []).join("");
      events.push(
        { type: "response.output_item.added", output_index, item: { ...item, summary: [] } },
        {
          type: "response.reasoning_summary_part.added",
          item_id,
          output_index,
          summary_index: 0,
          part: { type: "summary_text", text: "" },
        },
        ...(spec.reasoning ?? []).map((delta) => ({
          type: "response.reasoning_summary_text.delta",
          item_id,
          output_index,
          summary_index: 0,
          delta,
        })),
        { type: "response.reasoning_summary_text.done", item_id, output_index, summary_index: 0, text },
        {
          type: "response.reasoning_summary_part.done",
          item_id,
          output_index,
          summary_index: 0,
          part: { type: "summary_text", text },
        },
      );
    } else if (item.type === "message") {
      const text = textDeltas(spec.text).join("");
      const emptyPart = { type: "output_text", annotations: [], logprobs: [], text: "" };
      events.push(
        {
          type: "response.output_item.added",
          output_index,
          item: { ...item, status: "in_progress", content: [] },
        },
        { type: "response.content_part.added", item_id, output_index, content_index: 0, part: emptyPart },
        ...textDeltas(spec.text).map((delta) => ({
          type: "response.output_text.delta",
          item_id,
          output_index,
          content_index: 0,
          delta,
          logprobs: [],
        })),
        { type: "response.output_text.done", item_id, output_index, content_index: 0, text, logprobs: [] },
        {
          type: "response.content_part.done",
          item_id,
          output_index,
          content_index: 0,
          part: { ...emptyPart, text },
        },
      );
    } else {
      const args = String(item.arguments);
      events.push(
        {
          type: "response.output_item.added",
          output_index,
          item: { ...item, status: "in_progress", arguments: "" },
        },
        ...splitInTwo(args).map((delta) => ({
          type: "response.function_call_arguments.delta",
          item_id,
          output_index,
          delta,
        })),
        { type: "response.function_call_arguments.done", item_id, output_index, arguments: args },
      );
    }
    events.push({ type: "response.output_item.done", output_index, item });
  });
  events.push({ type: "response.completed", response: responseObject(spec, "completed", output) });
  return responsesSse(events);
}

/** A scripted turn as a non-streaming Responses body. */
export function responsesTurnJson(spec: TurnSpec): FakeResponse {
  return { type: "json", body: responseObject(spec, "completed", responsesOutput(spec)) };
}

function render(endpoint: OpenAIEndpoint, reply: OpenAIReply, request: RecordedRequest): FakeResponse {
  if (reply.type !== "turn") return reply;
  const isStreaming = (request.body as { stream?: unknown } | undefined)?.stream === true;
  if (endpoint === "chat") return isStreaming ? chatTurnSse(reply) : chatTurnJson(reply);
  return isStreaming ? responsesTurnSse(reply) : responsesTurnJson(reply);
}

/** Starts the fake server; close it with `close()`. */
export async function startFakeOpenAI(options: FakeOpenAIOptions): Promise<FakeOpenAI> {
  const counts: Record<OpenAIEndpoint, number> = { chat: 0, responses: 0 };
  const server = await startFakeHttpServer(async (request) => {
    const path = request.path.split("?")[0];
    const endpoint = (Object.keys(ENDPOINT_PATHS) as OpenAIEndpoint[]).find(
      (key) => ENDPOINT_PATHS[key] === path,
    );
    const script = endpoint ? options[endpoint] : undefined;
    if (!endpoint || !script || request.method !== "POST") {
      return openAIError(404, `no route for ${request.method} ${request.path}`, { code: "unknown_url" });
    }
    const index = counts[endpoint]++;
    const reply =
      typeof script === "function"
        ? await script(request, index)
        : script[Math.min(index, script.length - 1)];
    if (!reply) return openAIError(500, `the ${endpoint} script is empty`);
    return render(endpoint, reply, request);
  });
  return {
    ...server,
    baseUrl: `${server.url}/v1`,
    requestsTo: (endpoint) =>
      server.requests.filter((request) => request.path.split("?")[0] === ENDPOINT_PATHS[endpoint]),
  };
}
