import type { GenerateRequest, GenerateResponse, LlmBackend, StreamSink } from "./types.js";

/**
 * What the loop depends on: a client in front of a swappable backend. The retrying
 * implementation is {@link RetryingLlmClient} (retrying-client.ts).
 */
export interface LlmClient {
  /** The backend new requests will use. */
  readonly backend: LlmBackend;
  /** Swaps the backend; a request in flight keeps the one it started with. */
  setBackend(backend: LlmBackend): void;
  /** Non-streaming, retried on retryable errors. */
  generate(request: GenerateRequest): Promise<GenerateResponse>;
  /**
   * Streaming with reset semantics: calls `sink.onReset` before re-opening after a retryable
   * failure, `sink.onCompleted` once at the end, and throws (without `onReset`) on a final failure.
   */
  generateStream(request: GenerateRequest, sink: StreamSink): Promise<GenerateResponse>;
}
