import type { GenerateResponse, ThinkingBlock, TokenUsage, ToolCall } from "../types.js";
import { mapStopReason } from "./map-stop-reason.js";

/** A finished content block of a response, tool input already a JSON string. */
export type AssembledBlock =
  | { type: "text"; text: string }
  | ThinkingBlock
  | { type: "tool_use"; id: string; name: string; arguments: string };

/**
 * Content blocks in response order → {@link GenerateResponse}. Text blocks are concatenated as
 * they were streamed (so `content` equals the joined text deltas), likewise thinking text into
 * `reasoningContent`; thinking and redacted_thinking blocks are kept whole, with signatures, in
 * `thinkingBlocks` for replay; tool calls keep the model's order.
 */
export function assembleResponse(
  blocks: readonly AssembledBlock[],
  stopReason: string | null | undefined,
  usage: TokenUsage,
): GenerateResponse {
  let content = "";
  let reasoning = "";
  const toolCalls: ToolCall[] = [];
  const thinkingBlocks: ThinkingBlock[] = [];
  for (const block of blocks) {
    switch (block.type) {
      case "text":
        content += block.text;
        break;
      case "thinking":
        reasoning += block.thinking;
        thinkingBlocks.push({ type: "thinking", thinking: block.thinking, signature: block.signature });
        break;
      case "redacted_thinking":
        thinkingBlocks.push({ type: "redacted_thinking", data: block.data });
        break;
      case "tool_use":
        toolCalls.push({ id: block.id, name: block.name, arguments: block.arguments });
        break;
    }
  }
  const response: GenerateResponse = { content, toolCalls, usage };
  if (reasoning !== "") response.reasoningContent = reasoning;
  if (thinkingBlocks.length > 0) response.thinkingBlocks = thinkingBlocks;
  const finishReason = mapStopReason(stopReason);
  if (finishReason !== undefined) response.finishReason = finishReason;
  return response;
}
