import { type Tracer, type TracerProvider, trace } from "@opentelemetry/api";
import type { EventListener } from "../events/types.js";
import type { LlmClient } from "../llm/llm-client.js";
import type { SecretRedactor } from "../text/secret-redactor.js";
import { VERSION } from "../version.js";
import { ChatSpanRecorder } from "./chat-span-recorder.js";
import { CAPTURE_CONTENT_ENV, genAiProviderName } from "./gen-ai-conventions.js";
import { redactingTracer } from "./redacting-tracer.js";
import { TracedLlmClient } from "./traced-llm-client.js";

/** The instrumentation scope of every span. */
export const TRACER_NAME = "agentloop";
/** The package version (from package.json). */
export const TRACER_VERSION = VERSION;

/** How an agent traces (`CreateAgentParams.tracing`). */
export interface AgentTracingOptions {
  /**
   * Where the spans go. Default: the global tracer provider's `agentloop` tracer, when a provider
   * is registered (`trace.setGlobalTracerProvider`) by the time the agent is created; without
   * one the agent does no tracing work at all.
   */
  tracer?: Tracer;
  /**
   * Record prompts, completions, tool arguments and results on the spans. Default: off (see
   * {@link captureContentFrom} to follow `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`).
   */
  captureContent?: boolean;
}

export interface AgentTracingParams extends AgentTracingOptions {
  agent: string;
  session: string;
  model: string;
  llm: LlmClient;
  /** Read for the capture-content default (see {@link captureContentFrom}). Default: none (off). */
  env?: Readonly<Record<string, string | undefined>>;
  /**
   * The secrets the events hide: every span's attributes, events, status and exceptions are
   * redacted with them too (see {@link redactingTracer}). Default: none.
   */
  redactor?: SecretRedactor;
}

/** What a traced session is built with instead: one more event listener, and the traced client. */
export interface AgentTracing {
  listener: EventListener;
  llm: LlmClient;
  /** The `traceparent` of a running tool call's span (a chat it asks joins the trace). */
  traceparentOf(toolCallId: string): string | undefined;
}

/**
 * The global provider's tracer, or undefined when no provider is registered. The API's global is
 * a proxy that answers no-op tracers until an SDK registers; asking it once, when an agent is
 * created, is what keeps an untraced agent free of any per-event work.
 */
export function registeredTracer(): Tracer | undefined {
  const provider = trace.getTracerProvider() as TracerProvider & {
    getDelegateTracer?: (name: string, version?: string) => Tracer | undefined;
  };
  if (typeof provider.getDelegateTracer !== "function") return trace.getTracer(TRACER_NAME, TRACER_VERSION);
  return provider.getDelegateTracer(TRACER_NAME, TRACER_VERSION) === undefined
    ? undefined
    : trace.getTracer(TRACER_NAME, TRACER_VERSION);
}

/**
 * Whether spans carry message content, as the OpenTelemetry GenAI conventions let an operator say
 * with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` in the given environment.
 * @example
 * const agent = await createAgent({ ...params, tracing: { captureContent: captureContentFrom(process.env) } });
 */
export function captureContentFrom(env: Readonly<Record<string, string | undefined>>): boolean {
  return env[CAPTURE_CONTENT_ENV]?.trim().toLowerCase() === "true";
}

/** Tracing for one agent session, or undefined when there is nowhere to send spans. */
export function createAgentTracing(params: AgentTracingParams): AgentTracing | undefined {
  const registered = params.tracer ?? registeredTracer();
  if (registered === undefined) return undefined;
  const tracer = params.redactor === undefined ? registered : redactingTracer(registered, params.redactor);
  const captureContent = params.captureContent ?? captureContentFrom(params.env ?? {});
  const { llm } = params;
  const recorder = new ChatSpanRecorder({
    tracer,
    agent: params.agent,
    session: params.session,
    model: params.model,
    provider: () => genAiProviderName(llm.backend.provider),
    captureContent,
  });
  return {
    listener: recorder.listener,
    traceparentOf: (toolCallId) => recorder.traceparentOf(toolCallId),
    llm: new TracedLlmClient(llm, tracer, { recorder, session: params.session, captureContent }),
  };
}
