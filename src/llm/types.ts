/**
 * The common model every backend speaks. SDK and wire types never pass this boundary: the loop,
 * the machines and the events see only these plain, serialisable shapes.
 */

/** Token accounting for one request (or a sum of requests, see {@link addUsage}). */
export interface TokenUsage {
  prompt: number;
  completion: number;
  total: number;
  /** Prompt tokens served from the provider's prompt cache (a subset of `prompt`). */
  cached: number;
}

export const emptyUsage = (): TokenUsage => ({ prompt: 0, completion: 0, total: 0, cached: 0 });

export function addUsage(a: TokenUsage, b: TokenUsage): TokenUsage {
  return {
    prompt: a.prompt + b.prompt,
    completion: a.completion + b.completion,
    total: a.total + b.total,
    cached: a.cached + b.cached,
  };
}

export function createUsage(prompt: number, completion: number, cached = 0): TokenUsage {
  return { prompt, completion, total: prompt + completion, cached };
}

/** A tool call the model made. `arguments` is the raw JSON string the model produced. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

/**
 * An Anthropic thinking block, kept verbatim (with its signature) so it can be replayed on every
 * later request. Redacted blocks carry opaque `data` instead of text.
 */
export type ThinkingBlock =
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string };

/** A part of a message's content: text, an image, or a thinking block. */
export type ContentPart =
  | { type: "text"; text: string }
  /** An image, either as base64 data with its media type or as a URL. */
  | { type: "image"; mediaType?: string; data?: string; url?: string };

/** Who a message is from. */
export type Role = "system" | "user" | "assistant" | "tool";

/** One conversation message. `content` is plain text or a list of parts (text and images). */
export interface Message {
  role: Role;
  content: string | ContentPart[];
  /** assistant: the tool calls it made, in the order the model made them. */
  toolCalls?: ToolCall[];
  /** assistant: reasoning text (DeepSeek `reasoning_content`, Responses reasoning summaries). */
  reasoningContent?: string;
  /** assistant (Anthropic): thinking blocks with signatures, replayed verbatim. */
  thinkingBlocks?: ThinkingBlock[];
  /** tool: the id of the call this message answers. */
  toolCallId?: string;
  /** tool: the name of the tool that produced the result (some providers want it). */
  toolName?: string;
}

/** A tool definition as offered to the model: name, description and JSON-Schema parameters. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** How much the model should think before answering. */
export type ReasoningEffort = "low" | "medium" | "high";

/** Options of one request. Immutable by convention: use {@link withoutTools} to derive. */
export interface LlmOptions {
  model: string;
  temperature?: number;
  maxTokens?: number;
  tools?: ToolDefinition[];
  /**
   * How tools may be used. `"none"`: tool definitions stay in the request (the history may hold
   * tool calls, and Anthropic rejects such a request without tools) but the model cannot call one.
   */
  toolChoice?: "auto" | "none";
  reasoningEffort?: ReasoningEffort;
  /** Anthropic: put a cache breakpoint on the last message. */
  promptCaching?: boolean;
  /** Extra fields merged into the request body as they are. */
  extraBody?: Record<string, unknown>;
  /** Time to first byte, streaming only (default 60 s). */
  firstByteTimeoutMs?: number;
  /** Longest silence once a stream has started, streaming only (default 120 s). */
  streamIdleTimeoutMs?: number;
  /** Total generation time (default 5 min non-streaming, 30 min streaming). */
  totalTimeoutMs?: number;
}

/** True when any message holds a tool call or a tool result. */
export function hasToolTraffic(messages: readonly Message[]): boolean {
  return messages.some((m) => m.role === "tool" || (m.toolCalls !== undefined && m.toolCalls.length > 0));
}

/**
 * A copy of `options` with which the model cannot call a tool. Where the history already holds
 * tool calls the definitions are kept and `toolChoice: "none"` is set (Anthropic rejects a request
 * with tool_use blocks but no tools); elsewhere the definitions are dropped. reasoningEffort is kept.
 */
export function withoutTools(options: LlmOptions, messages: readonly Message[] = []): LlmOptions {
  if (options.tools && options.tools.length > 0 && hasToolTraffic(messages)) {
    return { ...options, toolChoice: "none" };
  }
  const { tools: _tools, toolChoice: _choice, ...rest } = options;
  return rest;
}

/** True when the model may call a tool with these options. */
export function canCallTools(options: LlmOptions): boolean {
  return (options.tools?.length ?? 0) > 0 && options.toolChoice !== "none";
}

/** The full result of one generation. */
export interface GenerateResponse {
  content: string;
  toolCalls: ToolCall[];
  reasoningContent?: string;
  thinkingBlocks?: ThinkingBlock[];
  /** Provider stop reason, normalised: "stop" | "tool_calls" | "length" | "content_filter" | other. */
  finishReason?: string;
  usage: TokenUsage;
}

/**
 * The streaming sink. `onReset` is called by the retrying client before it re-opens a stream
 * after a retryable failure; nothing is called after `onCompleted`.
 */
export interface StreamSink {
  onTextDelta(text: string): void;
  onReasoningDelta(text: string): void;
  onReset(reason: string, cause: unknown): void;
  onCompleted(response: GenerateResponse, usage: TokenUsage): void;
}

/** The sink a backend sees: backends never reset (the client does), they only stream. */
export type BackendSink = Pick<StreamSink, "onTextDelta" | "onReasoningDelta">;

/** One request to a backend: the messages and the options. */
export interface GenerateRequest {
  /** May start with one system message; backends move it where their API wants it. */
  messages: Message[];
  options: LlmOptions;
  signal?: AbortSignal;
  /**
   * Called by the client right before each attempt, the first and every retry (backends never call
   * it). What it throws ends the request as thrown, never retried: the session's lease fence uses
   * it, so a host that lost the session during a backoff does not send the retry.
   */
  beforeAttempt?: () => void;
}

/**
 * A protocol adapter. One request, one attempt: retries, resets and stray-markup checks belong to
 * the client. Errors thrown are {@link LlmError}s (see errors.ts).
 */
export interface LlmBackend {
  /** "anthropic" | "openai-chat" | "openai-responses" | "demo" | "scripted" … */
  readonly provider: string;
  generate(request: GenerateRequest): Promise<GenerateResponse>;
  /** Streams deltas into the sink and resolves with the full response. */
  generateStream(request: GenerateRequest, sink: BackendSink): Promise<GenerateResponse>;
}

/** Text of a message's content, images left out. */
export function textOf(content: string | ContentPart[]): string {
  if (typeof content === "string") return content;
  return content
    .filter((p): p is { type: "text"; text: string } => p.type === "text")
    .map((p) => p.text)
    .join("");
}
