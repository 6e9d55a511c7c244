import type { MessageCreateParamsBase, Tool } from "@anthropic-ai/sdk/resources/messages";
import type { LlmOptions, Message, ToolDefinition } from "../types.js";
import { toThinkingParams } from "./thinking-config.js";
import { toAnthropicMessages } from "./to-anthropic-messages.js";

/**
 * A Messages API request body without `stream` (the backend sets it per call). `temperature` is
 * deprecated (SDK 1.x dropped it from its types) but models before Claude 4.7 still take it.
 */
export type AnthropicRequestBody = Omit<MessageCreateParamsBase, "stream"> & { temperature?: number };

/**
 * Common messages + options → the Messages API request body.
 *
 * - max_tokens and `thinking` / `output_config` come from {@link toThinkingParams}; `temperature`
 *   is left out with thinking on, and for models that reject it (Claude 4.7+).
 * - Tools are `{name, description, input_schema}`. `toolChoice: "none"` keeps them and sends
 *   `tool_choice: {type: "none"}`: a history with tool_use blocks needs the definitions.
 * - `extraBody` is merged last, so it can set or override any field.
 *
 * @see https://docs.anthropic.com/en/api/messages
 */
export function toAnthropicRequest(messages: readonly Message[], options: LlmOptions): AnthropicRequestBody {
  const { system, messages: turns } = toAnthropicMessages(messages, { promptCaching: options.promptCaching });
  const { thinking, output_config, max_tokens, allowsTemperature } = toThinkingParams(options);
  const body: AnthropicRequestBody = { model: options.model, max_tokens, messages: turns };
  if (system !== undefined) body.system = system;
  if (thinking) body.thinking = thinking;
  if (output_config) body.output_config = output_config;
  if (options.temperature !== undefined && allowsTemperature) body.temperature = options.temperature;
  const tools = options.tools ?? [];
  if (tools.length > 0) {
    body.tools = tools.map(toAnthropicTool);
    if (options.toolChoice === "none") body.tool_choice = { type: "none" };
  }
  return options.extraBody ? { ...body, ...options.extraBody } : body;
}

function toAnthropicTool(tool: ToolDefinition): Tool {
  return {
    name: tool.name,
    description: tool.description,
    // The API requires an object schema; a parameters schema without `type` is read as one.
    input_schema: { type: "object", ...tool.parameters } as Tool["input_schema"],
  };
}
