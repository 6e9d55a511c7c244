import { afterEach, describe, expect, it } from "vitest";
import type { AnthropicBackend } from "../../../src/llm/anthropic/anthropic-backend.js";
import {
  AuthenticationError,
  CancelledError,
  ContextLengthExceededError,
  InvalidRequestError,
  InvalidResponseError,
  type LlmError,
  ModelNotFoundError,
  NetworkError,
  RateLimitError,
  RequestTimeoutError,
  ServerError,
} from "../../../src/llm/errors.js";
import type { GenerateRequest } from "../../../src/llm/types.js";
import {
  anthropicError,
  anthropicSse,
  anthropicSseFrame,
  anthropicStream,
  type FakeAnthropic,
  type FakeResponse,
  startFakeAnthropic,
} from "../../../src/testing/index.js";
import { anthropicFixture, loadAnthropicTranscript } from "../../support/fixtures.js";
import { backendFor, recordingSink, requestOf, user } from "./anthropic-test-kit.js";

let server: FakeAnthropic | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

type Mode = "generate" | "generateStream";
const modes: Mode[] = ["generate", "generateStream"];

function call(backend: AnthropicBackend, mode: Mode, request: GenerateRequest) {
  return mode === "generate" ? backend.generate(request) : backend.generateStream(request, recordingSink());
}

/** The error a promise rejects with (fails the test when it resolves). */
async function failureOf(promise: Promise<unknown>): Promise<LlmError> {
  try {
    await promise;
  } catch (error) {
    return error as LlmError;
  }
  throw new Error("expected the request to fail");
}

describe("AnthropicBackend error mapping (HTTP statuses)", () => {
  const cases: {
    name: string;
    reply: FakeResponse;
    type: new (...args: never[]) => LlmError;
    retryable: boolean;
  }[] = [
    {
      name: "429 with retry-after → RateLimitError carrying retryAfterMs",
      reply: anthropicError(
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your rate limit",
        {
          "retry-after": "7",
        },
      ),
      type: RateLimitError,
      retryable: true,
    },
    {
      name: "500 → ServerError",
      reply: anthropicError(500, "api_error", "Internal server error"),
      type: ServerError,
      retryable: true,
    },
    {
      name: "529 overloaded → ServerError",
      reply: anthropicError(529, "overloaded_error", "Overloaded"),
      type: ServerError,
      retryable: true,
    },
    {
      name: "401 → AuthenticationError",
      reply: anthropicError(401, "authentication_error", "invalid x-api-key"),
      type: AuthenticationError,
      retryable: false,
    },
    {
      name: "404 → ModelNotFoundError",
      reply: anthropicError(404, "not_found_error", "model: claude-nonexistent"),
      type: ModelNotFoundError,
      retryable: false,
    },
    {
      name: "400 → InvalidRequestError",
      reply: anthropicError(400, "invalid_request_error", "messages: roles must alternate"),
      type: InvalidRequestError,
      retryable: false,
    },
    {
      name: '400 "prompt is too long" → ContextLengthExceededError',
      reply: anthropicError(
        400,
        "invalid_request_error",
        "prompt is too long: 210385 tokens > 200000 maximum",
      ),
      type: ContextLengthExceededError,
      retryable: false,
    },
  ];

  for (const mode of modes) {
    for (const { name, reply, type, retryable } of cases) {
      it(`${mode}: ${name}, in exactly one request`, async () => {
        server = await startFakeAnthropic([reply, reply, reply]);

        const error = await failureOf(call(backendFor(server), mode, requestOf([user("Hi")])));

        expect(error).toBeInstanceOf(type);
        expect(error.retryable).toBe(retryable);
        expect(error.statusCode).toBe(reply.type === "json" ? (reply.status ?? 200) : undefined);
        // maxRetries: 0 — the SDK never retries on its own.
        expect(server.requests).toHaveLength(1);
      });
    }
  }

  it("keeps the server's message and retry-after on a rate limit", async () => {
    server = await startFakeAnthropic([
      anthropicError(429, "rate_limit_error", "slow down", { "retry-after": "7" }),
      anthropicError(429, "rate_limit_error", "slow down", { "retry-after-ms": "1500" }),
    ]);
    const backend = backendFor(server);

    const seconds = await failureOf(backend.generateStream(requestOf([user("Hi")]), recordingSink()));
    const milliseconds = await failureOf(backend.generate(requestOf([user("Hi")])));

    expect(seconds.retryAfterMs).toBe(7000);
    expect(seconds.message).toContain("slow down");
    expect(milliseconds.retryAfterMs).toBe(1500);
  });
});

describe("AnthropicBackend stream failures", () => {
  it("an SSE error event mid-stream → ServerError, after the deltas before it", async () => {
    server = await startFakeAnthropic([anthropicFixture("overloaded-mid-stream")]);
    const sink = recordingSink();

    const error = await failureOf(backendFor(server).generateStream(requestOf([user("Hi")]), sink));

    expect(error).toBeInstanceOf(ServerError);
    expect(error.message).toContain("Overloaded");
    expect(error.retryable).toBe(true);
    expect(sink.texts()).toEqual(["Partial", " answer"]);
  });

  it("a connection cut mid-stream → NetworkError", async () => {
    // message_start, block start, ping, 2 deltas: then the socket is destroyed (the delay lets
    // each frame reach the client before the cut).
    server = await startFakeAnthropic([anthropicFixture("text-stream", { cutAfter: 5, delayMs: 10 })]);
    const sink = recordingSink();

    const error = await failureOf(backendFor(server).generateStream(requestOf([user("Hi")]), sink));

    expect(error).toBeInstanceOf(NetworkError);
    expect(error.retryable).toBe(true);
    expect(sink.texts()).toEqual(["Hello", "!"]);
  });

  it("a stream that ends cleanly without message_stop → NetworkError", async () => {
    const frames = loadAnthropicTranscript("text-stream").filter((frame) => !frame.includes("message_stop"));
    server = await startFakeAnthropic([anthropicStream(frames)]);

    const error = await failureOf(
      backendFor(server).generateStream(requestOf([user("Hi")]), recordingSink()),
    );

    expect(error).toBeInstanceOf(NetworkError);
    expect(error.message).toContain("message_stop");
  });

  it("malformed JSON in a frame → InvalidResponseError (not retried), nothing delivered after it", async () => {
    server = await startFakeAnthropic([anthropicFixture("malformed-json")]);
    const sink = recordingSink();

    const error = await failureOf(backendFor(server).generateStream(requestOf([user("Hi")]), sink));

    expect(error).toBeInstanceOf(InvalidResponseError);
    expect(error.retryable).toBe(false);
    expect(sink.texts()).toEqual(["Hel"]);
  });

  it("an event of a known type with the wrong shape → InvalidResponseError", async () => {
    const frames = [
      ...anthropicSse([
        { type: "message_start", message: { id: "msg_1", usage: { input_tokens: 1, output_tokens: 1 } } },
      ]),
      anthropicSseFrame(
        "content_block_start",
        '{"type":"content_block_start","content_block":{"type":"text"}}',
      ),
    ];
    server = await startFakeAnthropic([anthropicStream(frames)]);

    const error = await failureOf(
      backendFor(server).generateStream(requestOf([user("Hi")]), recordingSink()),
    );

    expect(error).toBeInstanceOf(InvalidResponseError);
  });

  it("a non-streaming body that is not a message → InvalidResponseError", async () => {
    server = await startFakeAnthropic([{ type: "json", body: { type: "message", content: "not a list" } }]);

    const error = await failureOf(backendFor(server).generate(requestOf([user("Hi")])));

    expect(error).toBeInstanceOf(InvalidResponseError);
  });

  it("a refused connection → NetworkError", async () => {
    server = await startFakeAnthropic([]);
    const backend = backendFor(server);
    await server.close();
    server = undefined;

    const error = await failureOf(backend.generateStream(requestOf([user("Hi")]), recordingSink()));

    expect(error).toBeInstanceOf(NetworkError);
  });
});

describe("AnthropicBackend timeouts and cancellation", () => {
  it("a server that never answers, with a short firstByteTimeoutMs → RequestTimeoutError", async () => {
    server = await startFakeAnthropic([{ type: "hang" }]);
    const signal = new AbortController().signal;

    const error = await failureOf(
      backendFor(server).generateStream(
        requestOf([user("Hi")], { firstByteTimeoutMs: 100 }, signal),
        recordingSink(),
      ),
    );

    expect(error).toBeInstanceOf(RequestTimeoutError);
    expect(error.retryable).toBe(false);
    expect(error.message).toContain("first byte");
    expect(signal.aborted).toBe(false);
  });

  it("a stream that outlives totalTimeoutMs → RequestTimeoutError, not CancelledError", async () => {
    server = await startFakeAnthropic([anthropicFixture("text-stream", { delayMs: 100 })]);
    const sink = recordingSink();

    const error = await failureOf(
      backendFor(server).generateStream(requestOf([user("Hi")], { totalTimeoutMs: 250 }), sink),
    );

    expect(error).toBeInstanceOf(RequestTimeoutError);
    expect(sink.texts().join("")).not.toBe("Hello! How can I help you today?");
  });

  it("a non-streaming request that outlives totalTimeoutMs → RequestTimeoutError", async () => {
    server = await startFakeAnthropic([{ type: "hang" }]);

    const error = await failureOf(
      backendFor(server).generate(requestOf([user("Hi")], { totalTimeoutMs: 100 })),
    );

    expect(error).toBeInstanceOf(RequestTimeoutError);
  });

  for (const mode of modes) {
    it(`${mode}: an already aborted signal → CancelledError, without a request`, async () => {
      server = await startFakeAnthropic([anthropicFixture("text-stream")]);
      const controller = new AbortController();
      controller.abort();

      const error = await failureOf(
        call(backendFor(server), mode, requestOf([user("Hi")], {}, controller.signal)),
      );

      expect(error).toBeInstanceOf(CancelledError);
      expect(server.requests).toHaveLength(0);
    });
  }

  it("aborting while waiting for the response → CancelledError", async () => {
    server = await startFakeAnthropic([{ type: "hang" }]);
    const controller = new AbortController();
    const pending = backendFor(server).generate(requestOf([user("Hi")], {}, controller.signal));
    setTimeout(() => controller.abort(), 50);

    const error = await failureOf(pending);

    expect(error).toBeInstanceOf(CancelledError);
  });

  it("aborting mid-stream → CancelledError, and no delta after the abort", async () => {
    server = await startFakeAnthropic([anthropicFixture("text-stream")]);
    const controller = new AbortController();
    // Abort from inside the first delta: later events of the same chunk must not be delivered.
    const sink = recordingSink(() => controller.abort());

    const error = await failureOf(
      backendFor(server).generateStream(requestOf([user("Hi")], {}, controller.signal), sink),
    );

    expect(error).toBeInstanceOf(CancelledError);
    expect(sink.texts()).toEqual(["Hello"]);
  });

  it("a sink that throws: its error is passed on as it is", async () => {
    server = await startFakeAnthropic([anthropicFixture("text-stream")]);
    const bug = new TypeError("sink bug");
    const sink = recordingSink(() => {
      throw bug;
    });

    const error = await failureOf(backendFor(server).generateStream(requestOf([user("Hi")]), sink));

    expect(error).toBe(bug);
  });
});
