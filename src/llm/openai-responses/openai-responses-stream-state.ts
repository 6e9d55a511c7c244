import { NetworkError } from "../errors.js";
import { errorFromProviderError } from "../openai-shared/error-from-provider-error.js";
import type { BackendSink, GenerateResponse } from "../types.js";
import { fromOpenAIResponsesOutput, messageItemText } from "./from-openai-responses-output.js";
import { fromOpenAIResponsesResponse } from "./from-openai-responses-response.js";
import { fromOpenAIResponsesUsage } from "./from-openai-responses-usage.js";
import { mapOpenAIResponsesFinishReason } from "./map-openai-responses-finish-reason.js";
import type {
  ResponsesOutputItem,
  ResponsesResponse,
  ResponsesStreamEvent,
} from "./openai-responses-wire.js";

/** An output item being streamed, by its output_index. */
type Entry =
  | { type: "message"; text: string }
  | { type: "function_call"; callId: string; name: string; arguments: string }
  /** `parts`: summary parts by summary_index; `raw`: raw reasoning text (compatible servers). */
  | { type: "reasoning"; parts: string[]; raw: string }
  | { type: "other" };

function entryOf(item: ResponsesOutputItem): Entry {
  switch (item.type) {
    case "message":
      return { type: "message", text: messageItemText(item) };
    case "function_call":
      return {
        type: "function_call",
        callId: item.call_id,
        name: item.name,
        arguments: item.arguments ?? "",
      };
    case "reasoning":
      return { type: "reasoning", parts: (item.summary ?? []).map((part) => part.text), raw: "" };
    default:
      return { type: "other" };
  }
}

function itemOf(entry: Entry): ResponsesOutputItem {
  switch (entry.type) {
    case "message":
      return { type: "message", content: [{ type: "output_text", text: entry.text }] };
    case "function_call":
      return { type: "function_call", call_id: entry.callId, name: entry.name, arguments: entry.arguments };
    case "reasoning":
      return {
        type: "reasoning",
        summary: entry.parts.map((text) => ({ text })),
        content: entry.raw ? [{ text: entry.raw }] : [],
      };
    default:
      return { type: "other" };
  }
}

/**
 * Folds a Responses API event stream into one response, passing text and reasoning-summary deltas
 * to the sink as they come. Output items are kept by `output_index` and assembled in that order;
 * an item's `output_item.done` is authoritative over its deltas. Reasoning parts are separated by
 * a blank line, and the same separator is streamed, so the reasoning deltas add up to
 * `reasoningContent`.
 */
export class OpenAIResponsesStreamState {
  readonly #sink: BackendSink;
  readonly #entries = new Map<number, Entry>();
  #hasStreamedReasoning = false;
  #terminal: ResponsesResponse | undefined;

  constructor(sink: BackendSink) {
    this.#sink = sink;
  }

  /** Takes one parsed event; throws the mapped error for `error` and `response.failed`. */
  push(event: ResponsesStreamEvent): void {
    if (this.#terminal) return;
    switch (event.type) {
      case "response.output_item.added":
        this.#entries.set(event.output_index, entryOf(event.item));
        return;
      case "response.output_item.done":
        this.#finishItem(event.output_index, event.item);
        return;
      case "response.output_text.delta":
      case "response.refusal.delta": {
        const entry = this.#entry(event.output_index, "message");
        if (entry && event.delta) {
          entry.text += event.delta;
          this.#sink.onTextDelta(event.delta);
        }
        return;
      }
      case "response.reasoning_summary_part.added": {
        const entry = this.#entry(event.output_index, "reasoning");
        if (entry) entry.parts[event.summary_index] ??= "";
        return;
      }
      case "response.reasoning_summary_text.delta": {
        const entry = this.#entry(event.output_index, "reasoning");
        if (!entry || !event.delta) return;
        const part = entry.parts[event.summary_index] ?? "";
        entry.parts[event.summary_index] = part + this.#streamReasoning(event.delta, part === "");
        return;
      }
      case "response.reasoning_text.delta": {
        const entry = this.#entry(event.output_index, "reasoning");
        if (entry && event.delta) entry.raw += this.#streamReasoning(event.delta, entry.raw === "");
        return;
      }
      case "response.function_call_arguments.delta": {
        const entry = this.#entries.get(event.output_index);
        if (entry?.type === "function_call") entry.arguments += event.delta;
        return;
      }
      case "response.function_call_arguments.done": {
        const entry = this.#entries.get(event.output_index);
        if (entry?.type === "function_call") entry.arguments = event.arguments;
        return;
      }
      case "response.completed":
      case "response.incomplete":
        this.#terminal = event.response;
        return;
      case "response.failed":
        throw errorFromProviderError(event.response.error ?? { message: "the model's response failed" });
      case "error":
        throw errorFromProviderError(event.error ?? event);
      default:
        return;
    }
  }

  /**
   * The full response. A stream that ended before `response.completed` (or `.incomplete`) was
   * cut mid-way, which is a retryable {@link NetworkError}.
   */
  finish(): GenerateResponse {
    const terminal = this.#terminal;
    if (!terminal) throw new NetworkError("the stream ended before the response completed");
    // A server that streams no item events still sends the whole output with the terminal event.
    if (this.#entries.size === 0) return fromOpenAIResponsesResponse(terminal);
    const items = [...this.#entries.entries()].sort(([a], [b]) => a - b).map(([, entry]) => itemOf(entry));
    const { content, toolCalls, reasoning } = fromOpenAIResponsesOutput(items);
    return {
      content,
      toolCalls,
      ...(reasoning ? { reasoningContent: reasoning } : {}),
      finishReason: mapOpenAIResponsesFinishReason(terminal, toolCalls.length > 0),
      usage: fromOpenAIResponsesUsage(terminal.usage),
    };
  }

  /** The entry at `index` if it has `type`, created when the server skipped `output_item.added`. */
  #entry<T extends "message" | "reasoning">(index: number, type: T): Extract<Entry, { type: T }> | undefined {
    let entry = this.#entries.get(index);
    if (!entry) {
      entry = type === "message" ? { type: "message", text: "" } : { type: "reasoning", parts: [], raw: "" };
      this.#entries.set(index, entry);
    }
    return entry.type === type ? (entry as Extract<Entry, { type: T }>) : undefined;
  }

  /** Streams a reasoning delta, led by the part separator when it starts a new part. */
  #streamReasoning(delta: string, startsPart: boolean): string {
    if (startsPart && this.#hasStreamedReasoning) this.#sink.onReasoningDelta("\n\n");
    this.#hasStreamedReasoning = true;
    this.#sink.onReasoningDelta(delta);
    return delta;
  }

  #finishItem(index: number, item: ResponsesOutputItem): void {
    const streamed = this.#entries.get(index);
    const final = entryOf(item);
    const hasStreamedText = streamed?.type === "message" && streamed.text !== "";
    if (final.type === "message" && !hasStreamedText && final.text !== "") {
      // Nothing was streamed for this message: deliver its text now so the sink sees all of it.
      this.#sink.onTextDelta(final.text);
    }
    if (final.type === "reasoning" && streamed?.type === "reasoning") {
      // Summaries in the done item are authoritative; raw text only ever arrives as deltas.
      if (final.parts.length === 0) final.parts = streamed.parts;
      final.raw = streamed.raw;
    }
    this.#entries.set(index, final);
  }
}
