import { describe, expect, it } from "vitest";
import { CancelledError, InvalidRequestError, ServerError } from "../../src/llm/errors.js";
import type { BackendSink, GenerateRequest, Message } from "../../src/llm/types.js";
import { ScriptedBackend } from "../../src/testing/index.js";

const options = { model: "scripted-model", maxTokens: 100 };

function request(text = "hi", signal?: AbortSignal): GenerateRequest {
  return { messages: [{ role: "user", content: text }], options, ...(signal && { signal }) };
}

function recordingSink(onDelta?: () => void): { deltas: string[]; sink: BackendSink } {
  const deltas: string[] = [];
  return {
    deltas,
    sink: {
      onTextDelta: (text) => {
        deltas.push(`text:${text}`);
        onDelta?.();
      },
      onReasoningDelta: (text) => {
        deltas.push(`reasoning:${text}`);
        onDelta?.();
      },
    },
  };
}

describe("ScriptedBackend", () => {
  it("answers each request with the next step and records deep copies of the requests", async () => {
    const backend = new ScriptedBackend([{ text: "one" }, { text: "two" }]);
    const messages: Message[] = [{ role: "user", content: "first" }];
    const first = await backend.generate({ messages, options });
    messages.push({ role: "assistant", content: "mutated later" });
    const second = await backend.generateStream(request("second"), recordingSink().sink);
    expect([first.content, second.content]).toEqual(["one", "two"]);
    expect(backend.provider).toBe("scripted");
    expect(backend.requests).toEqual([
      { messages: [{ role: "user", content: "first" }], options, streaming: false },
      { messages: [{ role: "user", content: "second" }], options, streaming: true },
    ]);
    expect(backend.requests[0]?.options).not.toBe(options);
  });

  it("streams reasoning deltas, then text deltas, synchronously", async () => {
    const backend = new ScriptedBackend([
      { reasoningDeltas: ["let me ", "think"], deltas: ["Hel", "lo", "!"], thinkingBlocks: [] },
    ]);
    const { deltas, sink } = recordingSink();
    const pending = backend.generateStream(request(), sink);
    // No timers without delayMs: every delta is out before the first await returns.
    expect(deltas).toEqual(["reasoning:let me ", "reasoning:think", "text:Hel", "text:lo", "text:!"]);
    const response = await pending;
    expect(response).toMatchObject({
      content: "Hello!",
      reasoningContent: "let me think",
      thinkingBlocks: [],
      finishReason: "stop",
    });
  });

  it("streams an unsplit text as one delta", async () => {
    const backend = new ScriptedBackend([{ text: "whole answer", reasoning: "why" }]);
    const { deltas, sink } = recordingSink();
    await backend.generateStream(request(), sink);
    expect(deltas).toEqual(["reasoning:why", "text:whole answer"]);
  });

  it("builds tool calls with default ids, serialised arguments and finish reason tool_calls", async () => {
    const backend = new ScriptedBackend([
      { text: "ok" },
      {
        toolCalls: [
          { name: "current_time" },
          { name: "todo_list", arguments: { plan: [] } },
          { id: "mine", name: "raw", arguments: '{"a":1}' },
        ],
      },
    ]);
    await backend.generate(request());
    const response = await backend.generate(request());
    expect(response.content).toBe("");
    expect(response.finishReason).toBe("tool_calls");
    expect(response.toolCalls).toEqual([
      { id: "call_2_1", name: "current_time", arguments: "{}" },
      { id: "call_2_2", name: "todo_list", arguments: '{"plan":[]}' },
      { id: "mine", name: "raw", arguments: '{"a":1}' },
    ]);
  });

  it("uses the scripted usage and estimates what is missing as ceil(chars / 4)", async () => {
    const backend = new ScriptedBackend([
      { text: "x", usage: { prompt: 100, completion: 20, cached: 60 } },
      { text: "twelve chars", usage: { total: 999 } },
    ]);
    expect((await backend.generate(request())).usage).toEqual({
      prompt: 100,
      completion: 20,
      total: 120,
      cached: 60,
    });
    // prompt "hello" (5 chars) → 2 tokens; completion "twelve chars" (12 chars) → 3 tokens.
    expect((await backend.generate(request("hello"))).usage).toEqual({
      prompt: 2,
      completion: 3,
      total: 999,
      cached: 0,
    });
  });

  it("throws a scripted error, at once or after some deltas", async () => {
    const error = new ServerError("boom");
    const backend = new ScriptedBackend([
      { error },
      { deltas: ["a", "b", "c"], failAfterDeltas: 2, error },
      { deltas: ["a", "b"], failAfterDeltas: 2, error },
    ]);
    await expect(backend.generate(request())).rejects.toBe(error);
    const { deltas, sink } = recordingSink();
    await expect(backend.generateStream(request(), sink)).rejects.toBe(error);
    expect(deltas).toEqual(["text:a", "text:b"]);
    await expect(backend.generate(request())).rejects.toBe(error);
  });

  it("asks a script function for each step with the request and its index", async () => {
    const seen: Array<[string, number]> = [];
    const backend = new ScriptedBackend((recorded, index) => {
      seen.push([String(recorded.messages[0]?.content), index]);
      return { text: `answer ${index}` };
    });
    expect((await backend.generate(request("a"))).content).toBe("answer 0");
    expect((await backend.generateStream(request("b"), recordingSink().sink)).content).toBe("answer 1");
    expect(seen).toEqual([
      ["a", 0],
      ["b", 1],
    ]);
  });

  it("throws a clear non-retryable error when the script runs out", async () => {
    const backend = new ScriptedBackend([{ text: "only" }]);
    await backend.generate(request());
    const failure = backend.generate(request());
    await expect(failure).rejects.toBeInstanceOf(InvalidRequestError);
    await expect(failure).rejects.toThrow("ScriptedBackend: no step for request 2 (the script has 1 step)");
    expect(backend.requests).toHaveLength(2);
  });

  it("refuses deltas that do not join to the scripted text", () => {
    expect(() => new ScriptedBackend([{ text: "abc", deltas: ["a", "c"] }])).toThrow(/do not join/);
  });

  it("throws CancelledError when the signal is already aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    const backend = new ScriptedBackend([{ text: "a" }, { text: "b" }]);
    await expect(backend.generate(request("x", controller.signal))).rejects.toBeInstanceOf(CancelledError);
    await expect(
      backend.generateStream(request("x", controller.signal), recordingSink().sink),
    ).rejects.toBeInstanceOf(CancelledError);
  });

  it("stops streaming with CancelledError when aborted between delayed deltas", async () => {
    const controller = new AbortController();
    const backend = new ScriptedBackend([{ deltas: ["a", "b", "c"], delayMs: 1 }]);
    const { deltas, sink } = recordingSink(() => controller.abort());
    await expect(backend.generateStream(request("x", controller.signal), sink)).rejects.toBeInstanceOf(
      CancelledError,
    );
    expect(deltas).toEqual(["text:a"]);
  });
});
