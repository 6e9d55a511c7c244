import Anthropic from "@anthropic-ai/sdk";
import { z } from "zod";
import { InvalidResponseError, type LlmError, RequestTimeoutError } from "../errors.js";
import type { ProviderEnvironment } from "../provider-environment.js";
import {
  DEFAULT_FIRST_BYTE_TIMEOUT_MS,
  DEFAULT_STREAM_IDLE_TIMEOUT_MS,
  DEFAULT_STREAM_TOTAL_TIMEOUT_MS,
  DEFAULT_TOTAL_TIMEOUT_MS,
  RequestDeadline,
} from "../request-deadline.js";
import { sdkLogLevel } from "../sdk-log-level.js";
import type { BackendSink, GenerateRequest, GenerateResponse, LlmBackend } from "../types.js";
import { AnthropicStreamAccumulator, type StreamDelta } from "./anthropic-stream-accumulator.js";
import { AnthropicMessageResponse, AnthropicStreamEvent } from "./anthropic-wire-schema.js";
import { fromAnthropicMessage } from "./from-anthropic-message.js";
import { mapAnthropicError } from "./map-anthropic-error.js";
import { toAnthropicRequest } from "./to-anthropic-request.js";

export interface AnthropicBackendOptions {
  /**
   * Default: `ANTHROPIC_API_KEY` of `env`; without either, `ANTHROPIC_AUTH_TOKEN` of `env` is sent
   * as a bearer token, and with a `baseUrl` but no credential at all requests go out without one
   * (a keyless local server).
   */
  apiKey?: string;
  /** Default: `ANTHROPIC_BASE_URL` of `env`, else https://api.anthropic.com. */
  baseUrl?: string;
  /** Sent with every request (e.g. `anthropic-beta`, or a proxy's own header). */
  defaultHeaders?: Record<string, string>;
  /**
   * The only environment the backend reads (the SDK is given every value, so it reads none):
   * default none (pass `process.env` to read the process's). A key missing here never reaches the
   * server, even if the process has one.
   */
  env?: ProviderEnvironment;
}

/** Where the SDK sends requests when neither the options nor the environment say otherwise. */
const ANTHROPIC_API_URL = "https://api.anthropic.com";

/** A sink callback threw: that is the caller's error, passed on as it is, never mapped. */
class SinkFailure {
  constructor(readonly error: unknown) {}
}

/**
 * The Anthropic Messages API backend, on the official SDK. One request, one attempt: the SDK's
 * retries are off (`maxRetries: 0`) because retrying, with reset semantics, belongs to the client.
 * Timeouts are enforced here (the SDK's own covers only the wait for headers) through an abort
 * signal linked to the caller's; a timeout is reported as {@link RequestTimeoutError}, an abort
 * by the caller as `CancelledError`. Every failure is an `LlmError` (see mapAnthropicError).
 *
 * @see https://docs.anthropic.com/en/api/messages
 */
export class AnthropicBackend implements LlmBackend {
  readonly provider = "anthropic";
  private readonly client: Anthropic;

  constructor(options: AnthropicBackendOptions = {}) {
    const env = options.env ?? {};
    const apiKey = options.apiKey ?? nonEmpty(env.ANTHROPIC_API_KEY);
    const authToken = apiKey === undefined ? nonEmpty(env.ANTHROPIC_AUTH_TOKEN) : undefined;
    const baseUrl = options.baseUrl ?? nonEmpty(env.ANTHROPIC_BASE_URL);
    // A server of our own given without any credential (a local proxy, an Anthropic-compatible
    // server) is keyless: the explicit null stops the SDK from refusing to send without one.
    const isKeyless = apiKey === undefined && authToken === undefined && baseUrl !== undefined;
    this.client = new Anthropic({
      // null, never undefined: the SDK would read the process's ANTHROPIC_API_KEY / _AUTH_TOKEN.
      apiKey: apiKey ?? null,
      authToken: authToken ?? null,
      baseURL: baseUrl ?? ANTHROPIC_API_URL,
      defaultHeaders: isKeyless ? { authorization: null, ...options.defaultHeaders } : options.defaultHeaders,
      maxRetries: 0,
      logLevel: sdkLogLevel(env.ANTHROPIC_LOG),
    });
  }

  async generate(request: GenerateRequest): Promise<GenerateResponse> {
    const totalMs = request.options.totalTimeoutMs ?? DEFAULT_TOTAL_TIMEOUT_MS;
    const deadline = new RequestDeadline(request.signal, { totalMs });
    try {
      const body = toAnthropicRequest(request.messages, request.options);
      const message: unknown = await this.client.messages.create(
        { ...body, stream: false },
        { signal: deadline.signal, timeout: totalMs, maxRetries: 0 },
      );
      return fromAnthropicMessage(parseWire(AnthropicMessageResponse, message));
    } catch (error) {
      throw toLlmError(error, deadline, request.signal);
    } finally {
      deadline.dispose();
    }
  }

  async generateStream(request: GenerateRequest, sink: BackendSink): Promise<GenerateResponse> {
    const totalMs = request.options.totalTimeoutMs ?? DEFAULT_STREAM_TOTAL_TIMEOUT_MS;
    const firstByteMs = request.options.firstByteTimeoutMs ?? DEFAULT_FIRST_BYTE_TIMEOUT_MS;
    const idleMs = request.options.streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS;
    const deadline = new RequestDeadline(request.signal, { totalMs, firstByteMs, idleMs });
    try {
      const body = toAnthropicRequest(request.messages, request.options);
      const stream = await this.client.messages.create(
        { ...body, stream: true },
        { signal: deadline.signal, timeout: totalMs, maxRetries: 0 },
      );
      const accumulator = new AnthropicStreamAccumulator();
      for await (const raw of stream) {
        // Events already buffered still come after an abort: none may reach the sink.
        if (deadline.signal.aborted) break;
        deadline.markProgress();
        const delta = accumulator.push(parseWire(AnthropicStreamEvent, raw));
        if (delta) deliver(sink, delta);
        // Nothing may reach the sink after the response is complete.
        if (accumulator.isComplete) break;
      }
      // The SDK ends the iteration quietly when the request is aborted; a timeout or the
      // caller's abort must still surface as an error.
      if (deadline.stopError) throw deadline.stopError;
      return accumulator.finish();
    } catch (error) {
      if (error instanceof SinkFailure) throw error.error;
      throw toLlmError(error, deadline, request.signal);
    } finally {
      deadline.dispose();
    }
  }
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value;
}

function deliver(sink: BackendSink, delta: StreamDelta): void {
  try {
    if (delta.kind === "text") sink.onTextDelta(delta.text);
    else sink.onReasoningDelta(delta.text);
  } catch (error) {
    throw new SinkFailure(error);
  }
}

function parseWire<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) {
    throw new InvalidResponseError(`anthropic: unexpected response shape: ${z.prettifyError(result.error)}`);
  }
  return result.data;
}

/** A timeout of ours wins over what the abort looked like to the SDK (a user abort). */
function toLlmError(error: unknown, deadline: RequestDeadline, signal: AbortSignal | undefined): LlmError {
  const stopped = deadline.stopError;
  if (stopped instanceof RequestTimeoutError) {
    return new RequestTimeoutError(`anthropic: ${stopped.message}`, { cause: error });
  }
  if (stopped && error === stopped) return stopped;
  return mapAnthropicError(error, signal);
}
