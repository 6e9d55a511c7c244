import { afterEach, describe, expect, it, vi } from "vitest";
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
import { OpenAIResponsesBackend } from "../../../src/llm/openai-responses/index.js";
import type { BackendSink, GenerateRequest, LlmOptions } from "../../../src/llm/types.js";
import {
  cutAfterFrames,
  type FakeOpenAI,
  type OpenAIReply,
  openAIError,
  responsesSse,
  startFakeOpenAI,
} from "../../../src/testing/index.js";
import { loadOpenAITranscript } from "../../support/fixtures.js";

function recordingSink() {
  const texts: string[] = [];
  const sink: BackendSink = { onTextDelta: (text) => texts.push(text), onReasoningDelta: () => {} };
  return { sink, texts };
}

function requestWith(options: Partial<LlmOptions> = {}, signal?: AbortSignal): GenerateRequest {
  return {
    messages: [{ role: "user", content: "Hi" }],
    options: { model: "gpt-5-mini", ...options },
    signal,
  };
}

type Mode = "generate" | "generateStream";

const created = { type: "response.created", response: { status: "in_progress", output: [] } };
const textDelta = (delta: string) => ({
  type: "response.output_text.delta",
  output_index: 0,
  content_index: 0,
  delta,
});

describe("OpenAIResponsesBackend error mapping", () => {
  let server: FakeOpenAI | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await server?.close();
    server = undefined;
  });

  async function backendFor(reply: OpenAIReply) {
    server = await startFakeOpenAI({ responses: [reply] });
    return new OpenAIResponsesBackend({ apiKey: "sk-test", baseUrl: server.baseUrl });
  }

  async function failure(mode: Mode, reply: OpenAIReply, request = requestWith()): Promise<LlmError> {
    const backend = await backendFor(reply);
    const call =
      mode === "generate" ? backend.generate(request) : backend.generateStream(request, recordingSink().sink);
    return call.then(
      () => expect.fail("the request should have failed"),
      (error: LlmError) => error,
    );
  }

  describe.each<Mode>(["generate", "generateStream"])("%s", (mode) => {
    it("maps 429 with retry-after to RateLimitError carrying retryAfterMs", async () => {
      const error = await failure(
        mode,
        openAIError(429, "Rate limit reached", {
          code: "rate_limit_exceeded",
          headers: { "retry-after-ms": "1500" },
        }),
      );
      expect(error).toBeInstanceOf(RateLimitError);
      expect(error).toMatchObject({ statusCode: 429, retryAfterMs: 1500, retryable: true });
      expect(server?.requests).toHaveLength(1);
    });

    it("maps 500 to ServerError after exactly one HTTP request (SDK retries off)", async () => {
      const error = await failure(
        mode,
        openAIError(500, "The server had an error while processing your request."),
      );
      expect(error).toBeInstanceOf(ServerError);
      expect(server?.requests).toHaveLength(1);
    });

    it.each([
      [401, "Incorrect API key provided.", AuthenticationError],
      [404, "The model `gpt-nope` does not exist or you do not have access to it.", ModelNotFoundError],
      [400, "Unsupported parameter: 'temperature' is not supported with this model.", InvalidRequestError],
    ])("maps %i to the matching class", async (status, message, errorClass) => {
      const error = await failure(mode, openAIError(status, message));
      expect(error).toBeInstanceOf(errorClass);
      expect(error).toMatchObject({ statusCode: status, retryable: false, message });
      expect(server?.requests).toHaveLength(1);
    });

    it("maps 400 context_length_exceeded to ContextLengthExceededError", async () => {
      const error = await failure(
        mode,
        openAIError(
          400,
          "Your input exceeds the context window of this model. Please adjust your input and try again.",
          {
            code: "context_length_exceeded",
            param: "input",
          },
        ),
      );
      expect(error).toBeInstanceOf(ContextLengthExceededError);
    });

    it("refuses an already-aborted signal with CancelledError without sending anything", async () => {
      const controller = new AbortController();
      controller.abort();
      const error = await failure(mode, { type: "hang" }, requestWith({}, controller.signal));
      expect(error).toBeInstanceOf(CancelledError);
      expect(server?.requests).toHaveLength(0);
    });

    it("turns an abort while waiting into CancelledError", async () => {
      const controller = new AbortController();
      const backend = await backendFor({ type: "hang" });
      const request = requestWith({}, controller.signal);
      const call =
        mode === "generate"
          ? backend.generate(request)
          : backend.generateStream(request, recordingSink().sink);
      await vi.waitFor(() => expect(server?.requests).toHaveLength(1));
      controller.abort();
      await expect(call).rejects.toBeInstanceOf(CancelledError);
    });
  });

  it("maps response.failed to ServerError after the deltas that arrived", async () => {
    const backend = await backendFor(
      responsesSse([
        created,
        textDelta("Hel"),
        {
          type: "response.failed",
          response: {
            status: "failed",
            output: [],
            error: { code: "server_error", message: "The model crashed." },
          },
        },
      ]),
    );
    const { sink, texts } = recordingSink();
    const error = await backend.generateStream(requestWith(), sink).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ServerError);
    expect((error as LlmError).message).toBe("The model crashed.");
    expect(texts).toEqual(["Hel"]);
  });

  it("maps an error event by its code (flat, as typed by the SDK, or nested)", async () => {
    const flat = await failure(
      "generateStream",
      responsesSse([
        created,
        { type: "error", code: "rate_limit_exceeded", message: "Slow down.", param: null },
      ]),
    );
    expect(flat).toBeInstanceOf(RateLimitError);
    await server?.close();
    const nested = await failure(
      "generateStream",
      responsesSse([
        created,
        {
          type: "error",
          error: {
            type: "invalid_request_error",
            code: "context_length_exceeded",
            message: "Input too long.",
          },
        },
      ]),
    );
    expect(nested).toBeInstanceOf(ContextLengthExceededError);
    await server?.close();
    const unknown = await failure(
      "generateStream",
      responsesSse([created, { type: "error", message: "Oops." }]),
    );
    expect(unknown).toBeInstanceOf(ServerError);
  });

  it("enforces the total timeout on a non-streaming request", async () => {
    const error = await failure("generate", { type: "hang" }, requestWith({ totalTimeoutMs: 150 }));
    expect(error).toBeInstanceOf(RequestTimeoutError);
  });

  it("enforces the time to first byte on a stream whose server never answers", async () => {
    const error = await failure("generateStream", { type: "hang" }, requestWith({ firstByteTimeoutMs: 150 }));
    expect(error).toBeInstanceOf(RequestTimeoutError);
    expect(error.message).toContain("first byte");
  });

  it("maps a connection cut mid-stream to NetworkError after the deltas that arrived", async () => {
    const backend = await backendFor(
      cutAfterFrames(loadOpenAITranscript("openai-responses/text-stream.sse"), 7),
    );
    const { sink, texts } = recordingSink();
    const error = await backend.generateStream(requestWith(), sink).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(NetworkError);
    expect((error as LlmError).cause).toBeInstanceOf(Error);
    expect(texts).toEqual(["Hello", "!", " How"]);
  });

  it("maps a malformed JSON event to InvalidResponseError without logging", async () => {
    const consoleError = vi.spyOn(console, "error");
    const backend = await backendFor({
      type: "sse",
      frames: [
        `event: response.output_text.delta\ndata: ${JSON.stringify(textDelta("Hi"))}\n\n`,
        'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":\n\n',
      ],
    });
    const { sink, texts } = recordingSink();
    const error = await backend.generateStream(requestWith(), sink).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(InvalidResponseError);
    expect(texts).toEqual(["Hi"]);
    expect(consoleError).not.toHaveBeenCalled();
  });

  it("maps a known event of the wrong shape to InvalidResponseError", async () => {
    const error = await failure(
      "generateStream",
      responsesSse([created, { type: "response.output_text.delta", output_index: 0, delta: 7 }]),
    );
    expect(error).toBeInstanceOf(InvalidResponseError);
  });

  it("stops delivering deltas once the caller aborts mid-stream", async () => {
    const backend = await backendFor(
      responsesSse(
        Array.from({ length: 20 }, (_, index) => textDelta(`d${index}`)),
        { delayMs: 10 },
      ),
    );
    const controller = new AbortController();
    const texts: string[] = [];
    const sink: BackendSink = {
      onTextDelta: (text) => {
        texts.push(text);
        if (texts.length === 2) controller.abort();
      },
      onReasoningDelta: () => {},
    };
    await expect(backend.generateStream(requestWith({}, controller.signal), sink)).rejects.toBeInstanceOf(
      CancelledError,
    );
    expect(texts).toEqual(["d0", "d1"]);
  });
});
