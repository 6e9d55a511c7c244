import {
  AnthropicBackend,
  type AnthropicBackendOptions,
} from "../../../src/llm/anthropic/anthropic-backend.js";
import type { BackendSink, GenerateRequest, LlmOptions, Message } from "../../../src/llm/types.js";
import type { FakeAnthropic } from "../../../src/testing/index.js";

/**
 * A model that takes budget thinking and triggers no SDK warning (deprecated models and
 * `thinking.type=enabled` on 4.6 make the SDK print one).
 */
export const BUDGET_MODEL = "claude-haiku-4-5";
/** A model that takes adaptive thinking. */
export const ADAPTIVE_MODEL = "claude-opus-4-6";

export function backendFor(server: FakeAnthropic, options: AnthropicBackendOptions = {}): AnthropicBackend {
  return new AnthropicBackend({ apiKey: "test-key", baseUrl: server.url, ...options });
}

export function requestOf(
  messages: Message[],
  options: Partial<LlmOptions> = {},
  signal?: AbortSignal,
): GenerateRequest {
  const request: GenerateRequest = { messages, options: { model: BUDGET_MODEL, ...options } };
  if (signal) request.signal = signal;
  return request;
}

export const user = (text: string): Message => ({ role: "user", content: text });

export interface RecordingSink extends BackendSink {
  deltas: { kind: "text" | "reasoning"; text: string }[];
  texts(): string[];
  reasonings(): string[];
}

/** A sink that records every delta in arrival order. */
export function recordingSink(onDelta?: () => void): RecordingSink {
  const deltas: RecordingSink["deltas"] = [];
  return {
    deltas,
    onTextDelta(text) {
      deltas.push({ kind: "text", text });
      onDelta?.();
    },
    onReasoningDelta(text) {
      deltas.push({ kind: "reasoning", text });
      onDelta?.();
    },
    texts: () => deltas.filter((d) => d.kind === "text").map((d) => d.text),
    reasonings: () => deltas.filter((d) => d.kind === "reasoning").map((d) => d.text),
  };
}
