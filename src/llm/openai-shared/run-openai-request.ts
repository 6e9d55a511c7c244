import { CancelledError } from "../errors.js";
import {
  DEFAULT_FIRST_BYTE_TIMEOUT_MS,
  DEFAULT_STREAM_IDLE_TIMEOUT_MS,
  DEFAULT_STREAM_TOTAL_TIMEOUT_MS,
  DEFAULT_TOTAL_TIMEOUT_MS,
  RequestDeadline,
} from "../request-deadline.js";
import type { GenerateRequest } from "../types.js";
import { mapOpenAIError } from "./map-openai-error.js";

/** Per-request options for an SDK call: our signal, and an SDK timeout that never fires first. */
export interface SdkRequestOptions {
  signal: AbortSignal;
  timeout: number;
}

/**
 * Runs one SDK request under a {@link RequestDeadline}: refuses an already-aborted request
 * without touching the network, applies the time-to-first-byte and idle (streaming only) and
 * total limits, and turns every failure into an LlmError. A stream the deadline aborted ends quietly
 * inside the SDK, so the deadline's verdict is checked after `run` returns as well.
 */
export async function runOpenAIRequest<T>(
  request: GenerateRequest,
  isStreaming: boolean,
  run: (deadline: RequestDeadline, sdkOptions: SdkRequestOptions) => Promise<T>,
): Promise<T> {
  if (request.signal?.aborted) {
    throw new CancelledError("the request was cancelled before it started", { cause: request.signal.reason });
  }
  const { firstByteTimeoutMs, streamIdleTimeoutMs, totalTimeoutMs } = request.options;
  const totalMs =
    totalTimeoutMs ?? (isStreaming ? DEFAULT_STREAM_TOTAL_TIMEOUT_MS : DEFAULT_TOTAL_TIMEOUT_MS);
  const deadline = new RequestDeadline(request.signal, {
    firstByteMs: isStreaming ? (firstByteTimeoutMs ?? DEFAULT_FIRST_BYTE_TIMEOUT_MS) : undefined,
    idleMs: isStreaming ? (streamIdleTimeoutMs ?? DEFAULT_STREAM_IDLE_TIMEOUT_MS) : undefined,
    totalMs,
  });
  // The SDK's own timeout (10 min by default) would cut a long stream's headers wait short.
  const sdkOptions = { signal: deadline.signal, timeout: Math.ceil(totalMs) + 1_000 };
  try {
    const result = await run(deadline, sdkOptions);
    if (deadline.stopError) throw deadline.stopError;
    return result;
  } catch (error) {
    throw mapOpenAIError(error, deadline.stopError);
  } finally {
    deadline.dispose();
  }
}
