import {
  type Attributes,
  type Context,
  context as otelContext,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { type ErrorInfo, errorInfo } from "../errors/error-info.js";
import type { AgentEvent, EventOf } from "../events/types.js";
import {
  ATTR_AGENTLOOP_CHAT_ID,
  ATTR_AGENTLOOP_COMPACTION_TOPIC,
  ATTR_AGENTLOOP_ITERATION,
  ATTR_AGENTLOOP_ITERATION_FINAL,
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_INPUT_MESSAGES,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_OUTPUT_MESSAGES,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_GEN_AI_TOOL_CALL_RESULT,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_TOOL_TYPE,
  ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_OPERATION,
} from "./gen-ai-conventions.js";
import { textContent } from "./gen-ai-messages.js";

export interface ChatSpanRecorderParams {
  tracer: Tracer;
  agent: string;
  session: string;
  model: string;
  /** `gen_ai.provider.name` of the backend in use now (the backend can be swapped). */
  provider: () => string;
  /** Record the user's text, the answer, tool arguments and results. */
  captureContent: boolean;
}

interface OpenSpan {
  span: Span;
  /** The context that makes `span` the parent of the spans started under it. */
  context: Context;
}

interface OpenCompaction extends OpenSpan {
  /** False while the span was opened by the summary request, its `started` event still to come. */
  hasStarted: boolean;
}

interface OpenIteration extends OpenSpan {
  number: number;
  isFinal: boolean;
  /** Tool calls the model asked for that will run; unknown until the model has answered. */
  toolsExpected: number | undefined;
  toolsSettled: number;
}

/** Where a model request belongs in the tree; handed back when the request ends. */
export interface ModelRequestScope {
  parent: Context;
  iteration: OpenIteration | undefined;
}

/** What closes a span whose end event never came (a chat whose actor threw, an aborted compaction). */
const ABANDONED: ErrorInfo = errorInfo("internal", "ended without a completion event", { name: "_OTHER" });

function markFailed(span: Span, error: ErrorInfo): void {
  span.setAttribute(ATTR_ERROR_TYPE, error.name ?? error.code);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error.message });
}

/**
 * Turns the event sequence of one agent session into OpenTelemetry spans:
 *
 * ```
 * invoke_agent <agent>             ChatStarted … ChatCompleted / ChatFailed
 * ├── iteration                    ModelRequest … its model answer without tools, or its last tool result
 * │   ├── chat <model>             (started by TracedLlmClient under modelRequestScope())
 * │   ├── execute_tool <tool>      ToolCallStarted … ToolCallCompleted / ToolCallFailed
 * │   └── execute_tool <tool>
 * ├── iteration …
 * └── compaction                   ContextCompaction started … completed / failed
 *     └── chat <model>             the summary request
 * ```
 *
 * Why events and not the actors: the event stream already says when every step starts and ends,
 * so the machines stay pure and the actors untouched, and tracing that is off registers no
 * listener at all. The per-request details the events deliberately leave out of streamed responses
 * (usage, finish reason, the real error) come from {@link TracedLlmClient}, which wraps the one
 * LlmClient a session calls. A session runs one chat (or one compaction) at a time, so one set of
 * open spans is all the state there is. Parents are explicit (`trace.setSpan`), so no context
 * manager is needed; only a chat's own span takes the caller's active context as its parent.
 */
export class ChatSpanRecorder {
  readonly #params: ChatSpanRecorderParams;
  #chat: OpenSpan | undefined;
  #iteration: OpenIteration | undefined;
  #compaction: OpenCompaction | undefined;
  readonly #tools = new Map<string, Span>();

  constructor(params: ChatSpanRecorderParams) {
    this.#params = params;
  }

  /** The event listener (best-effort like every listener: the emitter swallows what it throws). */
  readonly listener = (event: AgentEvent): void => {
    switch (event.kind) {
      case "ChatStarted":
        this.#chatStarted(event);
        break;
      case "ModelRequest":
        this.#iterationStarted(event);
        break;
      case "ToolCallStarted":
        this.#toolStarted(event);
        break;
      case "ToolCallCompleted":
      case "ToolCallFailed":
        this.#toolSettled(event);
        break;
      case "ContextCompaction":
        this.#compactionChanged(event);
        break;
      case "ChatCompleted":
        this.#chatCompleted(event);
        break;
      case "ChatFailed":
        this.#chatFailed(event);
        break;
      default:
        // Deltas, segment starts and resets, state changes: the model request span covers them.
        break;
    }
  };

  /**
   * The parent of a model request starting now: the open iteration (each announces itself with
   * ModelRequest before it calls the model), else a compaction's summary request. The compaction
   * machine's summary actor starts before its `started` event is emitted, so that request may be
   * the first sign of the compaction: its span then opens here.
   */
  modelRequestScope(): ModelRequestScope {
    const iteration = this.#iteration;
    if (iteration !== undefined) return { parent: iteration.context, iteration };
    this.#compaction ??= this.#startCompaction();
    return { parent: this.#compaction.context, iteration: undefined };
  }

  /** The model answered: an iteration with no tool call to run is over now. */
  modelResponded(scope: ModelRequestScope, toolCalls: number): void {
    const iteration = scope.iteration;
    if (iteration === undefined || iteration !== this.#iteration) return;
    // The final turn's tool calls are dropped, never run: the last iteration is sent without tools and must answer in text.
    iteration.toolsExpected = iteration.isFinal ? 0 : toolCalls;
    if (iteration.toolsSettled >= iteration.toolsExpected) this.#endIteration();
  }

  /** The model request failed: so did its iteration. */
  modelFailed(scope: ModelRequestScope, error: ErrorInfo): void {
    const iteration = scope.iteration;
    if (iteration === undefined || iteration !== this.#iteration) return;
    markFailed(iteration.span, error);
    this.#endIteration();
  }

  #start(name: string, kind: SpanKind, attributes: Attributes, parent: OpenSpan | undefined): OpenSpan {
    const parentContext = parent?.context ?? otelContext.active();
    const span = this.#params.tracer.startSpan(name, { kind, attributes }, parentContext);
    return { span, context: trace.setSpan(parentContext, span) };
  }

  #chatStarted(event: EventOf<"ChatStarted">): void {
    const stale = this.#chat;
    this.#chat = undefined;
    this.#endOpenWork(ABANDONED);
    if (stale !== undefined) {
      markFailed(stale.span, ABANDONED);
      stale.span.end();
    }
    const { agent, session, model, provider, captureContent } = this.#params;
    const attributes: Attributes = {
      [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION.invokeAgent,
      [ATTR_GEN_AI_PROVIDER_NAME]: provider(),
      [ATTR_GEN_AI_AGENT_NAME]: agent,
      [ATTR_GEN_AI_CONVERSATION_ID]: session,
      [ATTR_GEN_AI_REQUEST_MODEL]: model,
      [ATTR_AGENTLOOP_CHAT_ID]: event.chatId,
    };
    if (captureContent) attributes[ATTR_GEN_AI_INPUT_MESSAGES] = textContent("user", event.text);
    // Asked by another agent's traced tool call: this chat joins that trace, under that call.
    const remote = event.traceparent === undefined ? undefined : spanContextOf(event.traceparent);
    const parent =
      remote === undefined
        ? undefined
        : { span: trace.wrapSpanContext(remote), context: trace.setSpanContext(ROOT_CONTEXT, remote) };
    this.#chat = this.#start(
      `${GEN_AI_OPERATION.invokeAgent} ${agent}`,
      SpanKind.INTERNAL,
      attributes,
      parent,
    );
  }

  /**
   * The W3C `traceparent` of a tool call's open span (version 00), for the chat it asks on another
   * host to join the trace under it; undefined when the call has no span (not started, or ended).
   */
  traceparentOf(toolCallId: string): string | undefined {
    const span = this.#tools.get(toolCallId);
    if (span === undefined) return undefined;
    const { traceId, spanId, traceFlags } = span.spanContext();
    return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, "0")}`;
  }

  #iterationStarted(event: EventOf<"ModelRequest">): void {
    this.#endIteration();
    const { span, context } = this.#start(
      "iteration",
      SpanKind.INTERNAL,
      { [ATTR_AGENTLOOP_ITERATION]: event.iteration, [ATTR_AGENTLOOP_ITERATION_FINAL]: event.final },
      this.#chat,
    );
    this.#iteration = {
      span,
      context,
      number: event.iteration,
      isFinal: event.final,
      toolsExpected: undefined,
      toolsSettled: 0,
    };
  }

  #toolStarted(event: EventOf<"ToolCallStarted">): void {
    const attributes: Attributes = {
      [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION.executeTool,
      [ATTR_GEN_AI_TOOL_NAME]: event.toolName,
      [ATTR_GEN_AI_TOOL_CALL_ID]: event.toolCallId,
      [ATTR_GEN_AI_TOOL_TYPE]: "function",
    };
    if (this.#params.captureContent) attributes[ATTR_GEN_AI_TOOL_CALL_ARGUMENTS] = event.arguments;
    const parent = this.#iteration?.number === event.iteration ? this.#iteration : this.#chat;
    const { span } = this.#start(
      `${GEN_AI_OPERATION.executeTool} ${event.toolName}`,
      SpanKind.INTERNAL,
      attributes,
      parent,
    );
    this.#tools.set(event.toolCallId, span);
  }

  #toolSettled(event: EventOf<"ToolCallCompleted"> | EventOf<"ToolCallFailed">): void {
    const span = this.#tools.get(event.toolCallId);
    if (span !== undefined) {
      this.#tools.delete(event.toolCallId);
      if (this.#params.captureContent) span.setAttribute(ATTR_GEN_AI_TOOL_CALL_RESULT, event.result);
      if (event.kind === "ToolCallFailed") markFailed(span, event.error);
      span.end();
    }
    const iteration = this.#iteration;
    if (iteration === undefined || iteration.number !== event.iteration) return;
    iteration.toolsSettled += 1;
    if (iteration.toolsExpected !== undefined && iteration.toolsSettled >= iteration.toolsExpected) {
      this.#endIteration();
    }
  }

  #compactionChanged(event: EventOf<"ContextCompaction">): void {
    if (event.phase !== "started") {
      this.#endCompaction(event.phase === "failed" ? (event.error ?? ABANDONED) : undefined);
      return;
    }
    // A compaction runs between iterations (after the last one, or to recover from an overflow).
    this.#endIteration();
    if (this.#compaction?.hasStarted) this.#endCompaction(ABANDONED);
    this.#compaction ??= this.#startCompaction();
    this.#compaction.hasStarted = true;
    if (this.#params.captureContent && event.topic !== undefined) {
      this.#compaction.span.setAttribute(ATTR_AGENTLOOP_COMPACTION_TOPIC, event.topic);
    }
  }

  #startCompaction(): OpenCompaction {
    const attributes: Attributes = {};
    if (this.#chat === undefined) {
      // A manual compaction (`/compact`, passivation) belongs to no chat: say whose it is.
      attributes[ATTR_GEN_AI_AGENT_NAME] = this.#params.agent;
      attributes[ATTR_GEN_AI_CONVERSATION_ID] = this.#params.session;
    }
    return { ...this.#start("compaction", SpanKind.INTERNAL, attributes, this.#chat), hasStarted: false };
  }

  #chatCompleted(event: EventOf<"ChatCompleted">): void {
    const chat = this.#chat;
    this.#chat = undefined;
    // Nothing is open after a completed chat; were it so, it completed with the chat.
    this.#endOpenWork(undefined);
    if (chat === undefined) return;
    chat.span.setAttributes({
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: event.usage.prompt,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: event.usage.completion,
      [ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: event.usage.cached,
    });
    if (this.#params.captureContent) {
      chat.span.setAttribute(ATTR_GEN_AI_OUTPUT_MESSAGES, textContent("assistant", event.result, "stop"));
    }
    chat.span.end();
  }

  #chatFailed(event: EventOf<"ChatFailed">): void {
    const chat = this.#chat;
    this.#chat = undefined;
    // What the chat left open (the tools of a cancelled iteration) ended with it, for its reason.
    this.#endOpenWork(event.error);
    if (chat === undefined) return;
    markFailed(chat.span, event.error);
    chat.span.end();
  }

  #endIteration(error?: ErrorInfo): void {
    const iteration = this.#iteration;
    if (iteration === undefined) return;
    this.#iteration = undefined;
    if (error !== undefined) markFailed(iteration.span, error);
    iteration.span.end();
  }

  #endCompaction(error?: ErrorInfo): void {
    const compaction = this.#compaction;
    if (compaction === undefined) return;
    this.#compaction = undefined;
    if (error !== undefined) markFailed(compaction.span, error);
    compaction.span.end();
  }

  /** Ends the open spans below the chat: `error` when they were cut short. */
  #endOpenWork(error: ErrorInfo | undefined): void {
    for (const span of this.#tools.values()) {
      if (error !== undefined) markFailed(span, error);
      span.end();
    }
    this.#tools.clear();
    this.#endIteration(error);
    this.#endCompaction(error);
  }
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** A remote parent's span context from a W3C `traceparent`; undefined for one that is malformed or all zeros. */
function spanContextOf(traceparent: string): SpanContext | undefined {
  const match = TRACEPARENT.exec(traceparent.trim());
  if (match === null || match[1] === "ff") return undefined;
  const traceId = match[2]!;
  const spanId = match[3]!;
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, traceFlags: Number.parseInt(match[4]!, 16), isRemote: true };
}
