import {
  type Attributes,
  context as otelContext,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { toErrorInfo } from "../events/types.js";
import type { LlmClient } from "../llm/llm-client.js";
import type { GenerateRequest, GenerateResponse, LlmBackend, StreamSink } from "../llm/types.js";
import type { ChatSpanRecorder, ModelRequestScope } from "./chat-span-recorder.js";
import {
  ATTR_AGENTLOOP_ATTEMPT,
  ATTR_AGENTLOOP_MODEL_RETRIES,
  ATTR_AGENTLOOP_RESET_REASON,
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_INPUT_MESSAGES,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_OUTPUT_MESSAGES,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MAX_TOKENS,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_REQUEST_TEMPERATURE,
  ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  ATTR_GEN_AI_SYSTEM_INSTRUCTIONS,
  ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  EVENT_AGENTLOOP_STREAM_RESET,
  GEN_AI_OPERATION,
  genAiProviderName,
} from "./gen-ai-conventions.js";
import { requestContent, responseContent } from "./gen-ai-messages.js";

export interface TracedLlmClientParams {
  recorder: ChatSpanRecorder;
  session: string;
  captureContent: boolean;
}

/** One model request being traced. */
interface RequestTrace {
  span: Span;
  scope: ModelRequestScope;
  retries: number;
}

/**
 * The session's {@link LlmClient} with a `chat <model>` span around every request (GenAI
 * inference span, kind CLIENT), hung where {@link ChatSpanRecorder} says the request belongs. It
 * sees what the events leave out: the request's own usage and finish reason, each stream reset
 * (a span event, and the retry count), the error a request failed with. Used only when tracing is
 * on; the loop never knows it is there.
 */
export class TracedLlmClient implements LlmClient {
  readonly #client: LlmClient;
  readonly #params: TracedLlmClientParams;
  readonly #tracer: Tracer;

  constructor(client: LlmClient, tracer: Tracer, params: TracedLlmClientParams) {
    this.#client = client;
    this.#tracer = tracer;
    this.#params = params;
  }

  get backend(): LlmBackend {
    return this.#client.backend;
  }

  setBackend(backend: LlmBackend): void {
    this.#client.setBackend(backend);
  }

  async generate(request: GenerateRequest): Promise<GenerateResponse> {
    const traced = this.#start(request);
    return this.#finish(
      traced,
      otelContext.with(trace.setSpan(traced.scope.parent, traced.span), () => this.#client.generate(request)),
    );
  }

  async generateStream(request: GenerateRequest, sink: StreamSink): Promise<GenerateResponse> {
    const traced = this.#start(request);
    const tracedSink: StreamSink = {
      onTextDelta: (text) => sink.onTextDelta(text),
      onReasoningDelta: (text) => sink.onReasoningDelta(text),
      onReset: (reason, cause) => {
        traced.retries += 1;
        traced.span.addEvent(EVENT_AGENTLOOP_STREAM_RESET, {
          [ATTR_AGENTLOOP_ATTEMPT]: traced.retries,
          [ATTR_AGENTLOOP_RESET_REASON]: reason,
          [ATTR_ERROR_TYPE]: toErrorInfo(cause).name,
        });
        sink.onReset(reason, cause);
      },
      onCompleted: (response, usage) => sink.onCompleted(response, usage),
    };
    return this.#finish(
      traced,
      otelContext.with(trace.setSpan(traced.scope.parent, traced.span), () =>
        this.#client.generateStream(request, tracedSink),
      ),
    );
  }

  #start(request: GenerateRequest): RequestTrace {
    const { options } = request;
    const attributes: Attributes = {
      [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION.chat,
      [ATTR_GEN_AI_PROVIDER_NAME]: genAiProviderName(this.#client.backend.provider),
      [ATTR_GEN_AI_REQUEST_MODEL]: options.model,
      [ATTR_GEN_AI_CONVERSATION_ID]: this.#params.session,
    };
    if (options.maxTokens !== undefined) attributes[ATTR_GEN_AI_REQUEST_MAX_TOKENS] = options.maxTokens;
    if (options.temperature !== undefined) attributes[ATTR_GEN_AI_REQUEST_TEMPERATURE] = options.temperature;
    if (this.#params.captureContent) {
      const { system, input } = requestContent(request.messages);
      if (system !== undefined) attributes[ATTR_GEN_AI_SYSTEM_INSTRUCTIONS] = system;
      attributes[ATTR_GEN_AI_INPUT_MESSAGES] = input;
    }
    const scope = this.#params.recorder.modelRequestScope();
    const span = this.#tracer.startSpan(
      `${GEN_AI_OPERATION.chat} ${options.model}`,
      { kind: SpanKind.CLIENT, attributes },
      scope.parent,
    );
    return { span, scope, retries: 0 };
  }

  async #finish(traced: RequestTrace, request: Promise<GenerateResponse>): Promise<GenerateResponse> {
    const { span, scope } = traced;
    let response: GenerateResponse;
    try {
      response = await request;
    } catch (error) {
      const info = toErrorInfo(error);
      span.setAttributes({ [ATTR_AGENTLOOP_MODEL_RETRIES]: traced.retries, [ATTR_ERROR_TYPE]: info.name });
      span.setStatus({ code: SpanStatusCode.ERROR, message: info.message });
      span.end();
      this.#params.recorder.modelFailed(scope, info);
      throw error;
    }
    span.setAttributes({
      [ATTR_AGENTLOOP_MODEL_RETRIES]: traced.retries,
      [ATTR_GEN_AI_RESPONSE_FINISH_REASONS]: [response.finishReason ?? "stop"],
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: response.usage.prompt,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: response.usage.completion,
      [ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: response.usage.cached,
    });
    if (this.#params.captureContent)
      span.setAttribute(ATTR_GEN_AI_OUTPUT_MESSAGES, responseContent(response));
    span.end();
    this.#params.recorder.modelResponded(scope, response.toolCalls.length);
    return response;
  }
}
