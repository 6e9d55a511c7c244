import { NetworkError } from "../errors.js";
import {
  type BackendSink,
  emptyUsage,
  type GenerateResponse,
  type TokenUsage,
  type ToolCall,
} from "../types.js";
import { fromOpenAIChatUsage } from "./from-openai-chat-usage.js";
import { mapOpenAIChatFinishReason } from "./map-openai-chat-finish-reason.js";
import type { OpenAIChatChunk, OpenAIChatToolCallDelta } from "./openai-chat-wire.js";

/**
 * Folds a Chat Completions stream into one response while passing text and reasoning deltas to
 * the sink as they come. Tool-call fragments are joined by their `index` (a model may interleave
 * two calls' fragments); only choice 0 is read.
 */
export class OpenAIChatStreamState {
  readonly #sink: BackendSink;
  #content = "";
  #reasoning = "";
  readonly #toolCalls = new Map<number, ToolCall>();
  #lastToolCallIndex: number | undefined;
  #finishReason: string | undefined;
  #usage: TokenUsage = emptyUsage();

  constructor(sink: BackendSink) {
    this.#sink = sink;
  }

  /** Takes one parsed chunk. */
  push(chunk: OpenAIChatChunk): void {
    if (chunk.usage) this.#usage = fromOpenAIChatUsage(chunk.usage);
    const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0);
    if (!choice) return;
    const delta = choice.delta;
    const reasoning = delta?.reasoning_content ?? delta?.reasoning;
    if (reasoning) {
      this.#reasoning += reasoning;
      this.#sink.onReasoningDelta(reasoning);
    }
    // A refusal is the model's answer, so it is shown as text.
    const text = delta?.content ?? delta?.refusal;
    if (text) {
      this.#content += text;
      this.#sink.onTextDelta(text);
    }
    for (const fragment of delta?.tool_calls ?? []) this.#addToolCallFragment(fragment);
    if (choice.finish_reason) this.#finishReason = choice.finish_reason;
  }

  /**
   * The full response. A stream that ended without a `finish_reason` was cut mid-way (some
   * proxies close the connection cleanly), which is a retryable {@link NetworkError}.
   */
  finish(): GenerateResponse {
    if (this.#finishReason === undefined) {
      throw new NetworkError("the stream ended before the model finished (no finish_reason)");
    }
    const toolCalls = [...this.#toolCalls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
    return {
      content: this.#content,
      toolCalls,
      ...(this.#reasoning ? { reasoningContent: this.#reasoning } : {}),
      finishReason: mapOpenAIChatFinishReason(this.#finishReason, toolCalls.length > 0),
      usage: this.#usage,
    };
  }

  #addToolCallFragment(fragment: OpenAIChatToolCallDelta): void {
    const index = fragment.index ?? this.#indexWithoutIndex(fragment.id);
    this.#lastToolCallIndex = index;
    let call = this.#toolCalls.get(index);
    if (!call) {
      call = { id: "", name: "", arguments: "" };
      this.#toolCalls.set(index, call);
    }
    if (fragment.id) call.id = fragment.id;
    // The name comes whole in the first fragment; some servers repeat it in every fragment.
    if (fragment.function?.name && !call.name) call.name = fragment.function.name;
    if (fragment.function?.arguments) call.arguments += fragment.function.arguments;
    if (!call.id) call.id = `call_${index}`;
  }

  /** Servers that omit `index` send a new id for a new call and no id for a continuation. */
  #indexWithoutIndex(id: string | null | undefined): number {
    if (id) {
      for (const [index, call] of this.#toolCalls) if (call.id === id) return index;
      return this.#toolCalls.size === 0 ? 0 : Math.max(...this.#toolCalls.keys()) + 1;
    }
    return this.#lastToolCallIndex ?? 0;
  }
}
