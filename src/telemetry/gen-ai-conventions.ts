/**
 * The OpenTelemetry GenAI semantic-convention names the spans use, plus agentloop's own.
 *
 * The GenAI conventions are still "Development" and live only in the incubating entry point of
 * `@opentelemetry/semantic-conventions`, which libraries are asked to copy rather than import: the
 * library depends on `@opentelemetry/api` alone. Names follow semconv 1.45 (`gen_ai.provider.name`,
 * not the older `gen_ai.system`).
 *
 * @see https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-spans/
 * @see https://opentelemetry.io/docs/specs/semconv/gen-ai/gen-ai-agent-spans/
 */

export const ATTR_GEN_AI_OPERATION_NAME = "gen_ai.operation.name";
export const ATTR_GEN_AI_PROVIDER_NAME = "gen_ai.provider.name";
export const ATTR_GEN_AI_AGENT_NAME = "gen_ai.agent.name";
export const ATTR_GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id";
export const ATTR_GEN_AI_REQUEST_MODEL = "gen_ai.request.model";
export const ATTR_GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens";
export const ATTR_GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature";
export const ATTR_GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons";
export const ATTR_GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens";
export const ATTR_GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens";
export const ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens";
export const ATTR_GEN_AI_TOOL_NAME = "gen_ai.tool.name";
export const ATTR_GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id";
export const ATTR_GEN_AI_TOOL_TYPE = "gen_ai.tool.type";
/** Opt-in content (see {@link CAPTURE_CONTENT_ENV}). */
export const ATTR_GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments";
export const ATTR_GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result";
export const ATTR_GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions";
export const ATTR_GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages";
export const ATTR_GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages";
/** Stable (not GenAI): the class of error an operation ended with. */
export const ATTR_ERROR_TYPE = "error.type";

export const GEN_AI_OPERATION = {
  invokeAgent: "invoke_agent",
  chat: "chat",
  executeTool: "execute_tool",
} as const;

/** agentloop's own attributes and span events (no convention covers iterations or compaction). */
export const ATTR_AGENTLOOP_CHAT_ID = "agentloop.chat.id";
export const ATTR_AGENTLOOP_ITERATION = "agentloop.iteration";
/** True on the last iteration, sent without tools so that the chat ends with an answer. */
export const ATTR_AGENTLOOP_ITERATION_FINAL = "agentloop.iteration.final";
/** How many times the model request's stream was reset and re-opened (0 when it never was). */
export const ATTR_AGENTLOOP_MODEL_RETRIES = "agentloop.model.retries";
/** The span event a stream reset leaves on the model request span. */
export const EVENT_AGENTLOOP_STREAM_RESET = "agentloop.stream.reset";
/** On {@link EVENT_AGENTLOOP_STREAM_RESET}: the attempt that failed (1-based) and why. */
export const ATTR_AGENTLOOP_ATTEMPT = "agentloop.attempt";
export const ATTR_AGENTLOOP_RESET_REASON = "agentloop.reset.reason";
export const ATTR_AGENTLOOP_COMPACTION_TOPIC = "agentloop.compaction.topic";

/**
 * The conventional switch for recording prompts, completions and tool arguments / results
 * (off by default: they may hold personal data and are large).
 */
export const CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/**
 * `gen_ai.provider.name` for one of our backends: the convention's well-known value where one
 * applies (both OpenAI APIs are `openai`), else the backend's own name (`demo`, `scripted`).
 */
export function genAiProviderName(backendProvider: string): string {
  if (backendProvider === "openai-chat" || backendProvider === "openai-responses") return "openai";
  return backendProvider;
}
