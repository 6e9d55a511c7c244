import { describe, expect, it } from "vitest";
import {
  AuthenticationError,
  CancelledError,
  InvalidRequestError,
  NetworkError,
  RateLimitError,
  RequestTimeoutError,
  ServerError,
  StrayToolMarkupError,
} from "../../src/llm/errors.js";
import { type RetryInfo, RetryingLlmClient } from "../../src/llm/retrying-client.js";
import type {
  BackendSink,
  GenerateRequest,
  GenerateResponse,
  LlmBackend,
  LlmOptions,
  StreamSink,
} from "../../src/llm/types.js";
import { createUsage } from "../../src/llm/types.js";
import { ScriptedBackend, type ScriptedStep } from "../../src/testing/index.js";

const noTools: LlmOptions = { model: "test-model" };
const withTools: LlmOptions = {
  model: "test-model",
  tools: [{ name: "current_time", description: "Current time", parameters: { type: "object" } }],
};
const strayText = '<tool_call>{"name": "current_time", "arguments": {}}</tool_call>';

function request(options: LlmOptions = noTools, signal?: AbortSignal): GenerateRequest {
  return { messages: [{ role: "user", content: "hello" }], options, ...(signal && { signal }) };
}

type SinkCall =
  | ["text", string]
  | ["reasoning", string]
  | ["reset", string, unknown]
  | ["completed", GenerateResponse];

function recordingSink(): { calls: SinkCall[]; sink: StreamSink } {
  const calls: SinkCall[] = [];
  return {
    calls,
    sink: {
      onTextDelta: (text) => calls.push(["text", text]),
      onReasoningDelta: (text) => calls.push(["reasoning", text]),
      onReset: (reason, cause) => calls.push(["reset", reason, cause]),
      onCompleted: (response, usage) => {
        expect(usage).toBe(response.usage);
        calls.push(["completed", response]);
      },
    },
  };
}

/** A sleep that records the delays and returns at once. */
function recordingSleep(): { delays: number[]; sleep: (ms: number) => Promise<void> } {
  const delays: number[] = [];
  return { delays, sleep: async (ms) => void delays.push(ms) };
}

function client(backend: LlmBackend, sleep: (ms: number) => Promise<void>, extra = {}): RetryingLlmClient {
  return new RetryingLlmClient({ backend, sleep, ...extra });
}

const serverError = () => new ServerError("overloaded", { statusCode: 529 });

describe("RetryingLlmClient.generate", () => {
  it("retries retryable errors with exponential backoff and returns the first success", async () => {
    const backend = new ScriptedBackend([
      { error: serverError() },
      { error: new NetworkError("reset") },
      { text: "ok" },
    ]);
    const { delays, sleep } = recordingSleep();
    const response = await client(backend, sleep).generate(request());
    expect(response.content).toBe("ok");
    expect(backend.requests).toHaveLength(3);
    expect(delays).toEqual([1000, 2000]);
  });

  it("doubles the delay from initialDelayMs and caps it at maxDelayMs (30 s by default)", async () => {
    const steps: ScriptedStep[] = Array.from({ length: 7 }, serverError).map((error) => ({ error }));
    const backend = new ScriptedBackend([...steps, { text: "ok" }]);
    const { delays, sleep } = recordingSleep();
    await client(backend, sleep, { maxAttempts: 8 }).generate(request());
    expect(delays).toEqual([1000, 2000, 4000, 8000, 16000, 30_000, 30_000]);
  });

  it("honours the server's retry-after, capped at 30 s", async () => {
    const backend = new ScriptedBackend([
      { error: new RateLimitError("slow down", { retryAfterMs: 7000 }) },
      { error: new RateLimitError("slow down", { retryAfterMs: 120_000 }) },
      { text: "ok" },
    ]);
    const { delays, sleep } = recordingSleep();
    await client(backend, sleep).generate(request());
    expect(delays).toEqual([7000, 30_000]);
  });

  it("throws a non-retryable error at once", async () => {
    const error = new AuthenticationError("bad key", { statusCode: 401 });
    const backend = new ScriptedBackend([{ error }, { text: "never" }]);
    const { delays, sleep } = recordingSleep();
    await expect(client(backend, sleep).generate(request())).rejects.toBe(error);
    expect(backend.requests).toHaveLength(1);
    expect(delays).toEqual([]);
  });

  it("never retries a timeout (a retry may bill twice)", async () => {
    const error = new RequestTimeoutError("no first byte in 60 s");
    const backend = new ScriptedBackend([{ error }, { text: "never" }]);
    const { sleep } = recordingSleep();
    await expect(client(backend, sleep).generate(request())).rejects.toBe(error);
    expect(backend.requests).toHaveLength(1);
  });

  it("throws the last error when the attempts are exhausted", async () => {
    const last = serverError();
    const backend = new ScriptedBackend([
      { error: serverError() },
      { error: serverError() },
      { error: last },
    ]);
    const { delays, sleep } = recordingSleep();
    await expect(client(backend, sleep).generate(request())).rejects.toBe(last);
    expect(backend.requests).toHaveLength(3);
    expect(delays).toEqual([1000, 2000]);
  });

  it("wraps a non-LlmError from the backend as a retryable NetworkError keeping the cause", async () => {
    const cause = new TypeError("fetch failed");
    const backend = new ScriptedBackend([{ error: cause }, { error: cause }]);
    const { sleep } = recordingSleep();
    const failure = client(backend, sleep, { maxAttempts: 2 }).generate(request());
    await expect(failure).rejects.toBeInstanceOf(NetworkError);
    await expect(failure).rejects.toMatchObject({ cause, message: "LLM request failed: fetch failed" });
    expect(backend.requests).toHaveLength(2);
  });

  it("repeats a response with stray tool markup once, without using up an attempt", async () => {
    const backend = new ScriptedBackend([{ text: strayText }, { text: "It is noon." }]);
    const { delays, sleep } = recordingSleep();
    const retries: RetryInfo[] = [];
    const llm = client(backend, sleep, { maxAttempts: 1, onRetry: (info: RetryInfo) => retries.push(info) });
    const response = await llm.generate(request(withTools));
    expect(response.content).toBe("It is noon.");
    expect(backend.requests).toHaveLength(2);
    expect(delays).toEqual([]);
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({ attempt: 1, counted: false, delayMs: 0, streaming: false });
    expect(retries[0]?.error).toBeInstanceOf(StrayToolMarkupError);
  });

  it("throws StrayToolMarkupError when the extra repeat has stray markup too", async () => {
    const backend = new ScriptedBackend([{ text: strayText }, { text: strayText }, { text: "never" }]);
    const { sleep } = recordingSleep();
    await expect(client(backend, sleep).generate(request(withTools))).rejects.toBeInstanceOf(
      StrayToolMarkupError,
    );
    expect(backend.requests).toHaveLength(2);
  });

  it("still retries ordinary errors after the stray-markup repeat was spent", async () => {
    const backend = new ScriptedBackend([{ text: strayText }, { error: serverError() }, { text: "fine" }]);
    const { delays, sleep } = recordingSleep();
    const response = await client(backend, sleep, { maxAttempts: 2 }).generate(request(withTools));
    expect(response.content).toBe("fine");
    expect(delays).toEqual([1000]);
  });

  it("does not check for stray markup when no tools were offered or tool use is off", async () => {
    for (const options of [noTools, { ...withTools, toolChoice: "none" as const }]) {
      const backend = new ScriptedBackend([{ text: strayText }]);
      const { sleep } = recordingSleep();
      const response = await client(backend, sleep).generate(request(options));
      expect(response.content).toBe(strayText);
      expect(backend.requests).toHaveLength(1);
    }
  });
});

describe("RetryingLlmClient.generateStream", () => {
  it("passes deltas through and calls onCompleted once, last, with the response and its usage", async () => {
    const backend = new ScriptedBackend([
      { reasoning: "thinking", deltas: ["Hel", "lo"], usage: { prompt: 10, completion: 2 } },
    ]);
    const { calls, sink } = recordingSink();
    const response = await client(backend, recordingSleep().sleep).generateStream(request(), sink);
    expect(response.usage).toEqual(createUsage(10, 2));
    expect(calls).toEqual([
      ["reasoning", "thinking"],
      ["text", "Hel"],
      ["text", "lo"],
      ["completed", response],
    ]);
  });

  it("resets with the reason and cause after deltas were delivered, then reopens and completes", async () => {
    const cut = new NetworkError("stream cut mid-way");
    const backend = new ScriptedBackend([
      { deltas: ["a", "b", "c"], failAfterDeltas: 2, error: cut },
      { deltas: ["x", "y"] },
    ]);
    const { delays, sleep } = recordingSleep();
    const { calls, sink } = recordingSink();
    const response = await client(backend, sleep).generateStream(request(), sink);
    expect(response.content).toBe("xy");
    expect(calls).toEqual([
      ["text", "a"],
      ["text", "b"],
      ["reset", "network", cut],
      ["text", "x"],
      ["text", "y"],
      ["completed", response],
    ]);
    expect(delays).toEqual([1000]);
    expect(backend.requests.map((recorded) => recorded.streaming)).toEqual([true, true]);
  });

  it("uses the error code as the reset reason", async () => {
    const backend = new ScriptedBackend([
      { error: new RateLimitError("429", { retryAfterMs: 1500 }) },
      { error: serverError() },
      { text: "done" },
    ]);
    const { delays, sleep } = recordingSleep();
    const { calls, sink } = recordingSink();
    await client(backend, sleep).generateStream(request(), sink);
    expect(calls.filter((call) => call[0] === "reset").map((call) => call[1])).toEqual([
      "rate_limit",
      "server_error",
    ]);
    expect(delays).toEqual([1500, 2000]);
  });

  it("throws the final error without onReset when the attempts are exhausted", async () => {
    const last = serverError();
    const backend = new ScriptedBackend([
      { deltas: ["1"], failAfterDeltas: 1, error: serverError() },
      { deltas: ["2"], failAfterDeltas: 1, error: serverError() },
      { deltas: ["3"], failAfterDeltas: 1, error: last },
    ]);
    const { calls, sink } = recordingSink();
    await expect(client(backend, recordingSleep().sleep).generateStream(request(), sink)).rejects.toBe(last);
    expect(calls.map((call) => call[0])).toEqual(["text", "reset", "text", "reset", "text"]);
  });

  it("throws a non-retryable error at once, without onReset, even after deltas", async () => {
    const error = new InvalidRequestError("bad request");
    const backend = new ScriptedBackend([
      { deltas: ["partial"], failAfterDeltas: 1, error },
      { text: "never" },
    ]);
    const { calls, sink } = recordingSink();
    await expect(client(backend, recordingSleep().sleep).generateStream(request(), sink)).rejects.toBe(error);
    expect(calls).toEqual([["text", "partial"]]);
    expect(backend.requests).toHaveLength(1);
  });

  it("resets on stray tool markup found at completion when tools were offered", async () => {
    const backend = new ScriptedBackend([{ text: strayText }, { text: "It is noon." }]);
    const { calls, sink } = recordingSink();
    const response = await client(backend, recordingSleep().sleep).generateStream(request(withTools), sink);
    expect(response.content).toBe("It is noon.");
    const reset = calls[1];
    expect(calls[0]).toEqual(["text", strayText]);
    expect(reset?.[0]).toBe("reset");
    expect(reset?.[1]).toBe("stray_tool_markup");
    expect(reset?.[2]).toBeInstanceOf(StrayToolMarkupError);
    expect(calls.slice(2)).toEqual([
      ["text", "It is noon."],
      ["completed", response],
    ]);
  });

  it("counts stray-markup resets against the attempts", async () => {
    const backend = new ScriptedBackend([{ text: strayText }, { text: strayText }]);
    const { calls, sink } = recordingSink();
    const llm = client(backend, recordingSleep().sleep, { maxAttempts: 2 });
    await expect(llm.generateStream(request(withTools), sink)).rejects.toBeInstanceOf(StrayToolMarkupError);
    expect(calls.filter((call) => call[0] === "reset")).toHaveLength(1);
    expect(calls.some((call) => call[0] === "completed")).toBe(false);
  });

  it("does not check stray markup when no tools were offered", async () => {
    const backend = new ScriptedBackend([{ text: strayText }]);
    const { calls, sink } = recordingSink();
    const response = await client(backend, recordingSleep().sleep).generateStream(request(), sink);
    expect(response.content).toBe(strayText);
    expect(calls.map((call) => call[0])).toEqual(["text", "completed"]);
  });

  it("forwards nothing a backend emits after its attempt ended", async () => {
    let leakedSink: BackendSink | undefined;
    const backend: LlmBackend = {
      provider: "leaky",
      generate: () => Promise.reject(new Error("unused")),
      generateStream: async (_request, sink) => {
        leakedSink = sink;
        sink.onTextDelta("only");
        return { content: "only", toolCalls: [], usage: createUsage(1, 1) };
      },
    };
    const { calls, sink } = recordingSink();
    await client(backend, recordingSleep().sleep).generateStream(request(), sink);
    leakedSink?.onTextDelta("late");
    leakedSink?.onReasoningDelta("late");
    expect(calls.map((call) => call[0])).toEqual(["text", "completed"]);
  });

  it("rethrows a failure of the caller's sink as it is, without retrying", async () => {
    const sinkFailure = new Error("UI gone");
    const backend = new ScriptedBackend([{ text: "a" }, { text: "never" }]);
    const sink: StreamSink = {
      onTextDelta: () => {
        throw sinkFailure;
      },
      onReasoningDelta: () => {},
      onReset: () => {},
      onCompleted: () => {},
    };
    await expect(client(backend, recordingSleep().sleep).generateStream(request(), sink)).rejects.toBe(
      sinkFailure,
    );
    expect(backend.requests).toHaveLength(1);
  });
});

describe("RetryingLlmClient cancellation", () => {
  it("rejects at once with CancelledError when cancelled during the backoff, and makes no more attempts", async () => {
    for (const streaming of [false, true]) {
      const controller = new AbortController();
      const backend = new ScriptedBackend([{ error: serverError() }, { text: "never" }]);
      // This sleep never ends and ignores the signal: the client itself must stop waiting.
      const sleep = (_ms: number) => {
        queueMicrotask(() => controller.abort());
        return new Promise<void>(() => {});
      };
      const { calls, sink } = recordingSink();
      const llm = client(backend, sleep);
      const pending = streaming
        ? llm.generateStream(request(noTools, controller.signal), sink)
        : llm.generate(request(noTools, controller.signal));
      await expect(pending).rejects.toBeInstanceOf(CancelledError);
      expect(backend.requests).toHaveLength(1);
      expect(calls.some((call) => call[0] === "completed")).toBe(false);
    }
  });

  it("makes no request when the signal is already aborted", async () => {
    const controller = new AbortController();
    controller.abort();
    const backend = new ScriptedBackend([{ text: "never" }]);
    const llm = client(backend, recordingSleep().sleep);
    await expect(llm.generate(request(noTools, controller.signal))).rejects.toBeInstanceOf(CancelledError);
    await expect(
      llm.generateStream(request(noTools, controller.signal), recordingSink().sink),
    ).rejects.toBeInstanceOf(CancelledError);
    expect(backend.requests).toHaveLength(0);
  });

  it("rejects at once when cancelled while a backend ignores the signal", async () => {
    const controller = new AbortController();
    const hanging: LlmBackend = {
      provider: "hanging",
      generate: () => new Promise(() => {}),
      generateStream: () => new Promise(() => {}),
    };
    const llm = client(hanging, recordingSleep().sleep);
    const pending = llm.generateStream(request(noTools, controller.signal), recordingSink().sink);
    controller.abort();
    await expect(pending).rejects.toBeInstanceOf(CancelledError);
  });

  it("turns whatever the backend throws after an abort into CancelledError, never retried", async () => {
    const controller = new AbortController();
    const abortError = new DOMException("This operation was aborted", "AbortError");
    let attempts = 0;
    const backend: LlmBackend = {
      provider: "aborting",
      generate: async () => {
        attempts += 1;
        controller.abort();
        throw abortError;
      },
      generateStream: () => Promise.reject(new Error("unused")),
    };
    const { delays, sleep } = recordingSleep();
    const failure = client(backend, sleep).generate(request(noTools, controller.signal));
    await expect(failure).rejects.toBeInstanceOf(CancelledError);
    await expect(failure).rejects.toMatchObject({ cause: abortError });
    expect(attempts).toBe(1);
    expect(delays).toEqual([]);
  });

  it("passes a CancelledError from the backend through unretried", async () => {
    const backend = new ScriptedBackend([{ error: new CancelledError("stopped") }, { text: "never" }]);
    await expect(client(backend, recordingSleep().sleep).generate(request())).rejects.toBeInstanceOf(
      CancelledError,
    );
    expect(backend.requests).toHaveLength(1);
  });
});

describe("RetryingLlmClient backend swapping", () => {
  it("keeps the backend a request started with for all its attempts", async () => {
    const first = new ScriptedBackend([{ error: serverError() }, { text: "from first" }]);
    const second = new ScriptedBackend([{ text: "from second" }]);
    let llm: RetryingLlmClient | undefined;
    const sleep = async () => llm?.setBackend(second);
    llm = client(first, sleep);
    const { calls, sink } = recordingSink();
    const response = await llm.generateStream(request(), sink);
    expect(response.content).toBe("from first");
    expect(first.requests).toHaveLength(2);
    expect(llm.backend).toBe(second);
    expect((await llm.generate(request())).content).toBe("from second");
    expect(second.requests).toHaveLength(1);
    expect(calls.map((call) => call[0])).toEqual(["reset", "text", "completed"]);
  });

  it("reports retries with the provider of the request's backend", async () => {
    const backend = new ScriptedBackend([{ error: serverError() }, { text: "ok" }]);
    const retries: RetryInfo[] = [];
    const llm = client(backend, recordingSleep().sleep, {
      onRetry: (info: RetryInfo) => {
        retries.push(info);
        throw new Error("a failing hook changes nothing");
      },
    });
    await llm.generateStream(request(), recordingSink().sink);
    expect(retries).toHaveLength(1);
    expect(retries[0]).toMatchObject({
      attempt: 1,
      maxAttempts: 3,
      delayMs: 1000,
      streaming: true,
      counted: true,
      provider: "scripted",
    });
  });

  it("refuses a maxAttempts below 1", () => {
    const backend = new ScriptedBackend([]);
    expect(() => new RetryingLlmClient({ backend, maxAttempts: 0 })).toThrow(RangeError);
  });
});
