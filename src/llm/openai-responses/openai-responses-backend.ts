import type OpenAI from "openai";
import type {
  ResponseCreateParamsNonStreaming,
  ResponseCreateParamsStreaming,
} from "openai/resources/responses/responses";
import { createOpenAIClient, type OpenAIBackendOptions } from "../openai-shared/create-openai-client.js";
import { parseWire } from "../openai-shared/parse-wire.js";
import { runOpenAIRequest } from "../openai-shared/run-openai-request.js";
import type { BackendSink, GenerateRequest, GenerateResponse, LlmBackend } from "../types.js";
import { fromOpenAIResponsesResponse } from "./from-openai-responses-response.js";
import { OpenAIResponsesStreamState } from "./openai-responses-stream-state.js";
import { ResponsesResponse, ResponsesStreamEvent } from "./openai-responses-wire.js";
import { toOpenAIResponsesRequest } from "./to-openai-responses-request.js";

/**
 * The Responses API backend. Streams by iterating the SDK's raw event stream (not its stream
 * helper, which enforces event ordering) and assembling the response itself. One request, one
 * attempt; errors are LlmErrors.
 *
 * @see https://platform.openai.com/docs/api-reference/responses
 */
export class OpenAIResponsesBackend implements LlmBackend {
  readonly provider = "openai-responses";
  readonly #client: OpenAI;

  /** @throws ConfigurationError when no API key and no base URL are configured. */
  constructor(options: OpenAIBackendOptions = {}) {
    this.#client = createOpenAIClient(options);
  }

  generate(request: GenerateRequest): Promise<GenerateResponse> {
    return runOpenAIRequest(request, false, async (_deadline, sdkOptions) => {
      const body = toOpenAIResponsesRequest(request.messages, request.options, false);
      // Our body is a checked subset of the API's (plus extraBody); the SDK's input union is
      // stricter than what the API accepts for replayed assistant messages.
      const response = await this.#client.responses.create(
        body as unknown as ResponseCreateParamsNonStreaming,
        sdkOptions,
      );
      return fromOpenAIResponsesResponse(parseWire(ResponsesResponse, response, "response"));
    });
  }

  generateStream(request: GenerateRequest, sink: BackendSink): Promise<GenerateResponse> {
    return runOpenAIRequest(request, true, async (deadline, sdkOptions) => {
      const body = toOpenAIResponsesRequest(request.messages, request.options, true);
      const stream = await this.#client.responses.create(
        body as unknown as ResponseCreateParamsStreaming,
        sdkOptions,
      );
      const state = new OpenAIResponsesStreamState(sink);
      for await (const event of stream) {
        // Nothing reaches the sink once the request was stopped.
        if (deadline.stopError) break;
        deadline.markProgress();
        state.push(parseWire(ResponsesStreamEvent, event, "response stream event"));
      }
      if (deadline.stopError) throw deadline.stopError;
      return state.finish();
    });
  }
}
