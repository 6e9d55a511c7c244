import { InvalidResponseError, NetworkError } from "../errors.js";
import type { GenerateResponse } from "../types.js";
import type { AnthropicStreamEvent, AnthropicUsage } from "./anthropic-wire-schema.js";
import { type AssembledBlock, assembleResponse } from "./assemble-response.js";
import { mapUsage, mergeUsage } from "./map-usage.js";

/** What one event contributes to the stream, for the sink. */
export type StreamDelta = { kind: "text"; text: string } | { kind: "reasoning"; text: string };

type OpenBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string }
  | { type: "tool_use"; id: string; name: string; input: unknown; json: string }
  | { type: "unknown" };

/**
 * Folds the raw events of one streamed Messages API response into a {@link GenerateResponse}.
 * Pure (no I/O): the backend feeds it validated events and forwards the deltas it returns.
 *
 * Blocks are keyed by their `index`; tool input arrives as `input_json_delta` fragments that are
 * concatenated in order (a tool with no fragments keeps the `input` of its start event); a
 * thinking block's signature arrives as a `signature_delta` just before the block stops.
 *
 * @see https://docs.anthropic.com/en/docs/build-with-claude/streaming#event-types
 */
export class AnthropicStreamAccumulator {
  private readonly blocks = new Map<number, OpenBlock>();
  private usage: AnthropicUsage = {};
  private stopReason: string | null | undefined;
  private stopped = false;

  /** True once `message_stop` arrived: the response is complete. */
  get isComplete(): boolean {
    return this.stopped;
  }

  /** Applies one event; returns the text or thinking delta it carried, if any. */
  push(event: AnthropicStreamEvent): StreamDelta | undefined {
    switch (event.type) {
      case "message_start":
        this.usage = mergeUsage(this.usage, event.message.usage);
        return undefined;
      case "content_block_start": {
        const block = event.content_block;
        this.blocks.set(
          event.index,
          block.type === "tool_use"
            ? { ...block, json: "" }
            : block.type === "unknown"
              ? { type: "unknown" }
              : { ...block },
        );
        // A start event may already carry text (the API sends "" today): pass it on.
        if (block.type === "text" && block.text !== "") return { kind: "text", text: block.text };
        if (block.type === "thinking" && block.thinking !== "")
          return { kind: "reasoning", text: block.thinking };
        return undefined;
      }
      case "content_block_delta":
        return this.applyDelta(event.index, event.delta);
      case "message_delta":
        this.usage = mergeUsage(this.usage, event.usage);
        if (event.delta.stop_reason != null) this.stopReason = event.delta.stop_reason;
        return undefined;
      case "message_stop":
        this.stopped = true;
        return undefined;
      default:
        // content_block_stop needs no work (blocks are final as they are); unknown events are skipped.
        return undefined;
    }
  }

  /**
   * The full response. Throws {@link NetworkError} when `message_stop` never came: the
   * connection ended mid-response, and a retry gets the whole response again.
   */
  finish(): GenerateResponse {
    if (!this.stopped) throw new NetworkError("anthropic: the stream ended before message_stop");
    const ordered = [...this.blocks.entries()].sort(([a], [b]) => a - b).map(([, block]) => block);
    const assembled: AssembledBlock[] = [];
    for (const block of ordered) {
      if (block.type === "unknown") continue;
      if (block.type === "tool_use") {
        const args = block.json !== "" ? block.json : JSON.stringify(block.input ?? {});
        assembled.push({ type: "tool_use", id: block.id, name: block.name, arguments: args });
      } else {
        assembled.push(block);
      }
    }
    return assembleResponse(assembled, this.stopReason, mapUsage(this.usage));
  }

  private applyDelta(
    index: number,
    delta: Extract<AnthropicStreamEvent, { type: "content_block_delta" }>["delta"],
  ): StreamDelta | undefined {
    const block = this.blocks.get(index);
    if (!block)
      throw new InvalidResponseError(
        `anthropic: content_block_delta for block ${index}, which never started`,
      );
    if (delta.type === "unknown" || block.type === "unknown") return undefined;
    if (delta.type === "text_delta" && block.type === "text") {
      block.text += delta.text;
      return { kind: "text", text: delta.text };
    }
    if (delta.type === "thinking_delta" && block.type === "thinking") {
      block.thinking += delta.thinking;
      return { kind: "reasoning", text: delta.thinking };
    }
    if (delta.type === "signature_delta" && block.type === "thinking") {
      block.signature += delta.signature;
      return undefined;
    }
    if (delta.type === "input_json_delta" && block.type === "tool_use") {
      block.json += delta.partial_json;
      return undefined;
    }
    throw new InvalidResponseError(`anthropic: a ${delta.type} for a ${block.type} block (index ${index})`);
  }
}
