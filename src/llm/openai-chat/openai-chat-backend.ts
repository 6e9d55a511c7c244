import type OpenAI from "openai";
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from "openai/resources/chat/completions";
import { createOpenAIClient, type OpenAIBackendOptions } from "../openai-shared/create-openai-client.js";
import { parseWire } from "../openai-shared/parse-wire.js";
import { runOpenAIRequest } from "../openai-shared/run-openai-request.js";
import type { BackendSink, GenerateRequest, GenerateResponse, LlmBackend } from "../types.js";
import { fromOpenAIChatCompletion } from "./from-openai-chat-completion.js";
import { OpenAIChatStreamState } from "./openai-chat-stream-state.js";
import { OpenAIChatChunk, OpenAIChatCompletion } from "./openai-chat-wire.js";
import { toOpenAIChatRequest } from "./to-openai-chat-request.js";

/**
 * The Chat Completions backend: OpenAI itself and any OpenAI-compatible server (vLLM, llama.cpp
 * server, Ollama, DeepSeek). One request, one attempt; errors are LlmErrors.
 *
 * @see https://platform.openai.com/docs/api-reference/chat
 */
export class OpenAIChatBackend implements LlmBackend {
  readonly provider = "openai-chat";
  readonly #client: OpenAI;

  /** @throws ConfigurationError when no API key and no base URL are configured. */
  constructor(options: OpenAIBackendOptions = {}) {
    this.#client = createOpenAIClient(options);
  }

  generate(request: GenerateRequest): Promise<GenerateResponse> {
    return runOpenAIRequest(request, false, async (_deadline, sdkOptions) => {
      const body = toOpenAIChatRequest(request.messages, request.options, false);
      const completion = await this.#client.chat.completions.create(
        body as ChatCompletionCreateParamsNonStreaming,
        sdkOptions,
      );
      return fromOpenAIChatCompletion(parseWire(OpenAIChatCompletion, completion, "chat completion"));
    });
  }

  generateStream(request: GenerateRequest, sink: BackendSink): Promise<GenerateResponse> {
    return runOpenAIRequest(request, true, async (deadline, sdkOptions) => {
      const body = toOpenAIChatRequest(request.messages, request.options, true);
      const stream = await this.#client.chat.completions.create(
        body as ChatCompletionCreateParamsStreaming,
        sdkOptions,
      );
      const state = new OpenAIChatStreamState(sink);
      for await (const chunk of stream) {
        // Nothing reaches the sink once the request was stopped.
        if (deadline.stopError) break;
        deadline.markProgress();
        state.push(parseWire(OpenAIChatChunk, chunk, "chat completion chunk"));
      }
      if (deadline.stopError) throw deadline.stopError;
      return state.finish();
    });
  }
}
