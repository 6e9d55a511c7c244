import {
  type AnthropicTurn,
  anthropicError,
  anthropicTurnJson,
  anthropicTurnSse,
  startFakeAnthropic,
} from "./fake-anthropic.js";
import type { FakeHttpServer, FakeResponse, RecordedRequest } from "./fake-http-server.js";
import {
  chatTurnJson,
  chatTurnSse,
  openAIError,
  responsesTurnJson,
  responsesTurnSse,
  startFakeOpenAI,
  type TurnSpec,
} from "./fake-openai.js";
import type { ScriptedFault, ScriptedResponse, ScriptedStep } from "./scripted-backend.js";

/** The wire formats the fake providers speak. */
export type FakeProviderKind = "anthropic" | "openai-chat" | "openai-responses";

const KINDS: readonly FakeProviderKind[] = ["anthropic", "openai-chat", "openai-responses"];

/**
 * One reply of a fake provider: a turn as data (the same steps as {@link scriptedModel}: text,
 * reasoning, tool calls, a `fault`), rendered in the provider's wire format, or a raw
 * {@link FakeResponse} (a transcript, an error, a hang). Steps that throw an `Error` object
 * (`{ error }`) have no wire form: use a `fault` or a raw error reply.
 */
export type FakeProviderReply = Exclude<ScriptedStep, { error: Error }> | FakeResponse;

/** A list (request N gets reply N) or a function of the request and its 0-based index. */
export type FakeProviderScript =
  | readonly FakeProviderReply[]
  | ((request: RecordedRequest, index: number) => FakeProviderReply | Promise<FakeProviderReply>);

/** Options of {@link startFakeProvider}. */
export interface FakeProviderOptions {
  /** The replies, in order, or a function answering each recorded request. */
  script: FakeProviderScript;
}

/** A running fake provider. */
export interface FakeProvider extends FakeHttpServer {
  kind: FakeProviderKind;
  /** The base URL the provider's SDK takes (`…/v1` for OpenAI, the origin for Anthropic). */
  baseUrl: string;
  /**
   * The environment that points agentloop (and the SDKs) at this server:
   * `AGENTLOOP_PROVIDER`, the family's `*_BASE_URL` and a placeholder `*_API_KEY`.
   */
  env: Record<string, string>;
  /** Parsed JSON bodies of the model requests, in order. */
  bodies(): Record<string, unknown>[];
}

/**
 * Starts a local server speaking one provider's wire format (SSE when the request streams, a
 * JSON body otherwise), answering model requests from `script`. Requests beyond a list get a
 * provider-shaped 500 naming the problem, so a test that asks too often fails loudly. Every
 * request is recorded in `requests`.
 *
 * Faults: `rate_limit` is a 429 with a `retry-after-ms` header (`retryAfterMs`, default 0),
 * `server_error` a 500, `disconnect_after` the stream of the step's first `afterDeltas` deltas
 * (all by default) cut before it completes.
 *
 * @param kind The wire format: `anthropic`, `openai-chat` or `openai-responses`.
 * @param options The script.
 * @returns The running server: `baseUrl` and `env` point a real SDK (or `createBackend`) at it;
 *   `close()` it when done.
 *
 * @example
 * ```ts
 * import { createAgent, createBackend, RetryingLlmClient } from "agentloop";
 * import { startFakeProvider } from "agentloop/testing";
 *
 * const fake = await startFakeProvider("openai-chat", { script: [{ text: "hi" }] });
 * const agent = await createAgent({
 *   llm: new RetryingLlmClient({ backend: createBackend({ provider: "openai-chat" }, fake.env) }),
 *   model: "gpt-test",
 * });
 * console.log((await agent.chat("hello")).result); // "hi", through the real OpenAI SDK
 * console.log(fake.bodies()[0]?.model); // "gpt-test": the request body as the provider got it
 * await fake.close();
 * ```
 */
export async function startFakeProvider(
  kind: FakeProviderKind,
  options: FakeProviderOptions,
): Promise<FakeProvider> {
  if (!KINDS.includes(kind)) {
    throw new TypeError(
      `startFakeProvider: unknown provider "${String(kind)}" (expected ${KINDS.join(", ")})`,
    );
  }
  const { script } = options;
  if (typeof script !== "function") for (const reply of script) checkReply(reply);
  let modelRequests = 0;
  // Called for model requests only: the index counts those, not stray requests to other paths.
  const next = async (request: RecordedRequest): Promise<FakeResponse> => {
    const index = modelRequests++;
    const reply = typeof script === "function" ? await script(request, index) : script[index];
    if (reply === undefined) {
      return errorReply(kind, 500, `fake ${kind}: no reply scripted for request ${index + 1}`);
    }
    checkReply(reply);
    const isStreaming = (request.body as { stream?: unknown } | undefined)?.stream === true;
    return render(kind, reply, isStreaming, index);
  };
  if (kind === "anthropic") {
    const server = await startFakeAnthropic(next);
    return {
      ...server,
      kind,
      baseUrl: server.url,
      env: { AGENTLOOP_PROVIDER: kind, ANTHROPIC_BASE_URL: server.url, ANTHROPIC_API_KEY: "fake-key" },
    };
  }
  const endpoint = kind === "openai-chat" ? "chat" : "responses";
  const server = await startFakeOpenAI({ [endpoint]: next });
  return {
    ...server,
    kind,
    env: { AGENTLOOP_PROVIDER: kind, OPENAI_BASE_URL: server.baseUrl, OPENAI_API_KEY: "fake-key" },
    bodies: () => server.requestsTo(endpoint).map((request) => request.body as Record<string, unknown>),
  };
}

function isRaw(reply: FakeProviderReply): reply is FakeResponse {
  return "type" in reply && typeof reply.type === "string";
}

function checkReply(reply: FakeProviderReply): void {
  if (isRaw(reply)) return;
  if ("error" in reply) {
    throw new TypeError(
      "startFakeProvider: a step with an `error` object has no wire form; script a `fault`",
    );
  }
  if ("fault" in reply && !["rate_limit", "server_error", "disconnect_after"].includes(reply.fault)) {
    throw new TypeError(`startFakeProvider: unknown fault "${String(reply.fault)}"`);
  }
}

function errorReply(kind: FakeProviderKind, status: number, message: string, headers = {}): FakeResponse {
  if (kind === "anthropic") {
    const type = status === 429 ? "rate_limit_error" : status >= 500 ? "api_error" : "invalid_request_error";
    return anthropicError(status, type, message, headers);
  }
  return openAIError(status, message, {
    headers,
    ...(status === 429 ? { type: "requests", code: "rate_limit_exceeded" } : {}),
  });
}

function render(kind: FakeProviderKind, reply: FakeProviderReply, isStreaming: boolean, index: number) {
  if (isRaw(reply)) return reply;
  if (!("fault" in reply)) return renderTurn(kind, turnOf(reply, index), isStreaming);
  return renderFault(kind, reply, isStreaming, index);
}

function renderFault(kind: FakeProviderKind, fault: ScriptedFault, isStreaming: boolean, index: number) {
  if (fault.fault === "rate_limit") {
    return errorReply(kind, 429, fault.message ?? "fake: rate limited", {
      "retry-after-ms": String(fault.retryAfterMs ?? 0),
    });
  }
  if (fault.fault === "server_error") return errorReply(kind, 500, fault.message ?? "fake: server error");
  // A cut: the first `afterDeltas` deltas, then the socket closes before the message completes.
  const reasoning = fault.reasoningDeltas ?? (fault.reasoning ? [fault.reasoning] : []);
  const text = fault.deltas ?? (fault.text ? [fault.text] : []);
  const kept = fault.afterDeltas ?? reasoning.length + text.length;
  const partial: ScriptedResponse = {
    reasoningDeltas: reasoning.slice(0, kept),
    deltas: text.slice(0, Math.max(0, kept - reasoning.length)),
  };
  if (!isStreaming) return { type: "reset" } satisfies FakeResponse;
  const stream = renderTurn(kind, turnOf(partial, index), true);
  if (stream.type !== "sse") return stream;
  const end = lastDeltaFrame(kind, stream.frames);
  return { ...stream, frames: stream.frames.slice(0, end), cutAfter: end } satisfies FakeResponse;
}

/** How many frames to keep so that every delta is out and nothing that completes the message. */
function lastDeltaFrame(kind: FakeProviderKind, frames: readonly string[]): number {
  const isDelta = (frame: string) =>
    kind === "openai-chat"
      ? /"delta":\{"(content|reasoning_content)":/.test(frame)
      : /^event: \S*(_delta|\.delta)\n/m.test(frame) && !frame.includes("signature_delta");
  let end = kind === "openai-responses" ? 2 : 1;
  frames.forEach((frame, position) => {
    if (isDelta(frame)) end = position + 1;
  });
  return end;
}

/** A scripted answer in the shape the wire renderers take (ids as the scripted model makes them). */
function turnOf(step: ScriptedResponse, index: number): TurnSpec {
  const text = step.deltas ?? (step.text !== undefined ? [step.text] : undefined);
  const reasoning = step.reasoningDeltas ?? (step.reasoning !== undefined ? [step.reasoning] : undefined);
  const turn: TurnSpec = {};
  if (text !== undefined) turn.text = text;
  if (reasoning !== undefined) turn.reasoning = reasoning;
  if (step.toolCalls) {
    turn.toolCalls = step.toolCalls.map((call, position) => ({
      id: call.id ?? `call_${index + 1}_${position + 1}`,
      name: call.name,
      arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {}),
    }));
  }
  if (step.usage?.prompt !== undefined && step.usage.completion !== undefined) {
    turn.usage = {
      prompt: step.usage.prompt,
      completion: step.usage.completion,
      cached: step.usage.cached ?? 0,
    };
  }
  return turn;
}

function renderTurn(kind: FakeProviderKind, turn: TurnSpec, isStreaming: boolean): FakeResponse {
  if (kind === "openai-chat") return isStreaming ? chatTurnSse(turn) : chatTurnJson(turn);
  if (kind === "openai-responses") return isStreaming ? responsesTurnSse(turn) : responsesTurnJson(turn);
  const { reasoning, ...rest } = turn;
  const anthropic: AnthropicTurn = { ...rest, ...(reasoning ? { thinking: reasoning } : {}) };
  return isStreaming ? anthropicTurnSse(anthropic) : anthropicTurnJson(anthropic);
}
