import { abortableSleep, throwIfAborted } from "../abortable-sleep.js";
import { estimatePromptTokens, estimateTokens } from "../estimate-tokens.js";
import type { BackendSink, GenerateRequest, GenerateResponse, LlmBackend } from "../types.js";
import { createUsage } from "../types.js";
import { createDemoReply, type DemoReply } from "./demo-reply.js";

export interface DemoBackendOptions {
  /** Pause before each streamed word, so a UI looks live. Default 20 ms; use 0 in tests. */
  deltaDelayMs?: number;
  /** Injected for tests; must reject when `signal` aborts. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

/**
 * The offline, deterministic model (provider "demo") used when no provider is
 * configured: it streams its reasoning and then its answer word by word, calls the built-in
 * `current_time` and `todo_list` tools when the prompt asks for them, and labels every text answer
 * with "[demo] ". Same conversation in, same response out. Usage is estimated as characters / 4.
 */
export class DemoBackend implements LlmBackend {
  readonly provider = "demo";
  readonly #deltaDelayMs: number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;

  constructor(options: DemoBackendOptions = {}) {
    this.#deltaDelayMs = options.deltaDelayMs ?? 20;
    this.#sleep = options.sleep ?? abortableSleep;
  }

  async generate(request: GenerateRequest): Promise<GenerateResponse> {
    throwIfAborted(request.signal);
    return toResponse(createDemoReply(request.messages, request.options), request);
  }

  async generateStream(request: GenerateRequest, sink: BackendSink): Promise<GenerateResponse> {
    throwIfAborted(request.signal);
    const reply = createDemoReply(request.messages, request.options);
    for (const word of words(reply.reasoning)) {
      await this.#pause(request.signal);
      sink.onReasoningDelta(word);
    }
    for (const word of words(reply.text)) {
      await this.#pause(request.signal);
      sink.onTextDelta(word);
    }
    return toResponse(reply, request);
  }

  async #pause(signal: AbortSignal | undefined): Promise<void> {
    if (this.#deltaDelayMs > 0) await this.#sleep(this.#deltaDelayMs, signal);
    throwIfAborted(signal);
  }
}

/** Splits before each word that follows whitespace: the parts join back to `text` exactly. */
function words(text: string): string[] {
  return text === "" ? [] : text.split(/(?<=\s)(?=\S)/);
}

function toResponse(reply: DemoReply, request: GenerateRequest): GenerateResponse {
  const calls = reply.toolCalls.map((call) => call.name + call.arguments).join("");
  const response: GenerateResponse = {
    content: reply.text,
    toolCalls: reply.toolCalls,
    finishReason: reply.toolCalls.length > 0 ? "tool_calls" : "stop",
    usage: createUsage(
      estimatePromptTokens(request.messages),
      estimateTokens(reply.reasoning + reply.text + calls),
    ),
  };
  if (reply.reasoning !== "") response.reasoningContent = reply.reasoning;
  return response;
}
