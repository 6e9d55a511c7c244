import { abortableSleep, throwIfAborted } from "./abortable-sleep.js";
import { InvalidRequestError } from "./errors.js";
import { estimatePromptTokens, estimateTokens } from "./estimate-tokens.js";
import type {
  BackendSink,
  GenerateRequest,
  GenerateResponse,
  LlmBackend,
  LlmOptions,
  Message,
  ThinkingBlock,
  TokenUsage,
  ToolCall,
} from "./types.js";
import { createUsage } from "./types.js";

/** A tool call in a script: the id defaults to `call_<request>_<n>`, arguments to `{}`. */
export interface ScriptedToolCall {
  id?: string;
  name: string;
  /** A JSON string as the model would send it, or an object to be serialised. */
  arguments?: string | Record<string, unknown>;
}

/** What the scripted model answers. Everything is optional: `{}` is an empty reply. */
export interface ScriptedResponse {
  text?: string;
  /** How `text` is streamed; joined they must equal `text` (which defaults to their join). */
  deltas?: string[];
  reasoning?: string;
  /** How `reasoning` is streamed (before any text); joined they must equal `reasoning`. */
  reasoningDeltas?: string[];
  toolCalls?: ScriptedToolCall[];
  thinkingBlocks?: ThinkingBlock[];
  /** Default: "tool_calls" when there are tool calls, else "stop". */
  finishReason?: string;
  /** Missing counts are estimated as ceil(characters / 4); `total` defaults to their sum. */
  usage?: Partial<TokenUsage>;
  /** Pause before each streamed delta, in ms (default: none, no timers at all). */
  delayMs?: number;
}

/**
 * A failing step. With `failAfterDeltas`, a streaming request first delivers that many deltas of
 * the response fields (reasoning first, then text) and then throws; otherwise it throws at once.
 */
export interface ScriptedFailure extends Omit<ScriptedResponse, "finishReason" | "usage" | "toolCalls"> {
  error: Error;
  failAfterDeltas?: number;
}

/** One step of a script: a response, or a failure. */
export type ScriptedStep = ScriptedResponse | ScriptedFailure;

/** A step list, or a function choosing the step for each request (`index` is 0-based). */
export type Script = readonly ScriptedStep[] | ((request: ScriptedRequest, index: number) => ScriptedStep);

/** A request as the scripted backend received it (deep copies: later mutation does not show). */
export interface ScriptedRequest {
  messages: Message[];
  options: LlmOptions;
  streaming: boolean;
}

/**
 * A scripted model for tests (provider "scripted"): each request consumes the next step of the
 * script and is recorded in {@link requests}. Deltas are delivered synchronously unless a step
 * sets `delayMs`; the abort signal is honoured before and between deltas. Running out of steps is
 * a non-retryable {@link InvalidRequestError} that says so.
 */
export class ScriptedBackend implements LlmBackend {
  readonly provider = "scripted";
  /** Every request received, in order. */
  readonly requests: ScriptedRequest[] = [];
  readonly #script: Script;

  constructor(script: Script) {
    // Catch a script whose deltas contradict its text when it is written, not when it runs.
    if (typeof script !== "function") script.forEach(streamedDeltas);
    this.#script = script;
  }

  async generate(request: GenerateRequest): Promise<GenerateResponse> {
    const { step, index } = this.#next(request, false);
    throwIfAborted(request.signal);
    if ("error" in step) throw step.error;
    return buildResponse(step, index, request.messages);
  }

  async generateStream(request: GenerateRequest, sink: BackendSink): Promise<GenerateResponse> {
    const { step, index } = this.#next(request, true);
    throwIfAborted(request.signal);
    const deltas = streamedDeltas(step);
    const limit = "error" in step ? (step.failAfterDeltas ?? 0) : deltas.length;
    for (const delta of deltas.slice(0, limit)) {
      if (step.delayMs !== undefined && step.delayMs > 0) {
        await abortableSleep(step.delayMs, request.signal);
      }
      throwIfAborted(request.signal);
      if (delta.kind === "reasoning") sink.onReasoningDelta(delta.text);
      else sink.onTextDelta(delta.text);
    }
    if ("error" in step) throw step.error;
    return buildResponse(step, index, request.messages);
  }

  #next(request: GenerateRequest, streaming: boolean): { step: ScriptedStep; index: number } {
    const index = this.requests.length;
    const recorded: ScriptedRequest = {
      messages: structuredClone(request.messages),
      options: structuredClone(request.options),
      streaming,
    };
    this.requests.push(recorded);
    const step = typeof this.#script === "function" ? this.#script(recorded, index) : this.#script[index];
    if (step === undefined) {
      const source =
        typeof this.#script === "function"
          ? "the script function returned none"
          : `the script has ${this.#script.length} step${this.#script.length === 1 ? "" : "s"}`;
      throw new InvalidRequestError(`ScriptedBackend: no step for request ${index + 1} (${source})`);
    }
    streamedDeltas(step);
    return { step, index };
  }
}

type Delta = { kind: "reasoning" | "text"; text: string };

function streamedDeltas(step: ScriptedStep): Delta[] {
  const reasoning = split(step.reasoning, step.reasoningDeltas, "reasoning");
  const text = split(step.text, step.deltas, "text");
  return [
    ...reasoning.map((part): Delta => ({ kind: "reasoning", text: part })),
    ...text.map((part): Delta => ({ kind: "text", text: part })),
  ];
}

/** The deltas of one field: as scripted, else the whole value in one delta. */
function split(value: string | undefined, deltas: string[] | undefined, field: string): string[] {
  if (deltas === undefined) return value ? [value] : [];
  if (value !== undefined && deltas.join("") !== value) {
    // Not retryable, so a retrying client in front reports the mistake at once.
    throw new InvalidRequestError(
      `ScriptedBackend: the ${field} deltas do not join to the scripted ${field}`,
    );
  }
  return deltas;
}

function buildResponse(step: ScriptedResponse, index: number, messages: Message[]): GenerateResponse {
  const content = step.text ?? step.deltas?.join("") ?? "";
  const reasoning = step.reasoning ?? step.reasoningDeltas?.join("");
  const toolCalls = (step.toolCalls ?? []).map(
    (call, position): ToolCall => ({
      id: call.id ?? `call_${index + 1}_${position + 1}`,
      name: call.name,
      arguments: typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments ?? {}),
    }),
  );
  const completionText = content + (reasoning ?? "") + toolCalls.map((c) => c.name + c.arguments).join("");
  const prompt = step.usage?.prompt ?? estimatePromptTokens(messages);
  const completion = step.usage?.completion ?? estimateTokens(completionText);
  const usage = createUsage(prompt, completion, step.usage?.cached ?? 0);
  if (step.usage?.total !== undefined) usage.total = step.usage.total;
  const response: GenerateResponse = {
    content,
    toolCalls,
    finishReason: step.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
    usage,
  };
  if (reasoning !== undefined) response.reasoningContent = reasoning;
  if (step.thinkingBlocks !== undefined) response.thinkingBlocks = structuredClone(step.thinkingBlocks);
  return response;
}
