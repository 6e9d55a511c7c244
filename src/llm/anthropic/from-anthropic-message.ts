import type { GenerateResponse } from "../types.js";
import type { AnthropicMessageResponse } from "./anthropic-wire-schema.js";
import { type AssembledBlock, assembleResponse } from "./assemble-response.js";
import { mapUsage } from "./map-usage.js";

/**
 * A non-streaming Messages API response → {@link GenerateResponse}. Tool inputs are serialised
 * back to JSON strings (the common model keeps arguments as the model's JSON); block types the
 * loop has no use for (server tools, container uploads…) are skipped.
 *
 * @see https://docs.anthropic.com/en/api/messages
 */
export function fromAnthropicMessage(message: AnthropicMessageResponse): GenerateResponse {
  const blocks: AssembledBlock[] = [];
  for (const block of message.content) {
    switch (block.type) {
      case "text":
      case "thinking":
      case "redacted_thinking":
        blocks.push(block);
        break;
      case "tool_use":
        blocks.push({
          type: "tool_use",
          id: block.id,
          name: block.name,
          arguments: JSON.stringify(block.input ?? {}),
        });
        break;
    }
  }
  return assembleResponse(blocks, message.stop_reason, mapUsage(message.usage));
}
