import { describe, expect, it } from "vitest";
import { AnthropicStreamAccumulator } from "../../../src/llm/anthropic/anthropic-stream-accumulator.js";
import { AnthropicStreamEvent } from "../../../src/llm/anthropic/anthropic-wire-schema.js";
import { InvalidResponseError, NetworkError } from "../../../src/llm/errors.js";

const event = (value: unknown) => AnthropicStreamEvent.parse(value);

describe("AnthropicStreamAccumulator", () => {
  it("uses a tool's start input when no input_json_delta came, and maps stop reasons", () => {
    const accumulator = new AnthropicStreamAccumulator();
    accumulator.push(
      event({ type: "message_start", message: { usage: { input_tokens: 3, output_tokens: 1 } } }),
    );
    accumulator.push(
      event({
        type: "content_block_start",
        index: 0,
        content_block: { type: "tool_use", id: "t", name: "n", input: {} },
      }),
    );
    accumulator.push(
      event({ type: "message_delta", delta: { stop_reason: "max_tokens" }, usage: { output_tokens: 9 } }),
    );
    accumulator.push(event({ type: "message_stop" }));

    expect(accumulator.finish()).toEqual({
      content: "",
      toolCalls: [{ id: "t", name: "n", arguments: "{}" }],
      finishReason: "length",
      usage: { prompt: 3, completion: 9, total: 12, cached: 0 },
    });
  });

  it("rejects a delta for a block that never started, or of the wrong kind for its block", () => {
    const accumulator = new AnthropicStreamAccumulator();
    expect(() =>
      accumulator.push(
        event({ type: "content_block_delta", index: 4, delta: { type: "text_delta", text: "x" } }),
      ),
    ).toThrow(InvalidResponseError);

    accumulator.push(
      event({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
    );
    expect(() =>
      accumulator.push(
        event({
          type: "content_block_delta",
          index: 0,
          delta: { type: "input_json_delta", partial_json: "{" },
        }),
      ),
    ).toThrow(InvalidResponseError);
  });

  it("refuses to finish before message_stop", () => {
    const accumulator = new AnthropicStreamAccumulator();
    accumulator.push(event({ type: "message_start", message: { usage: null } }));
    expect(() => accumulator.finish()).toThrow(NetworkError);
  });
});
