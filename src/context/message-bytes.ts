import type { Message } from "../llm/types.js";

/** What one message costs besides its text: the object, its fields, the array slot (a rough figure). */
const MESSAGE_OVERHEAD_BYTES = 160;

/** What each tool call or thinking block costs besides its text. */
const PART_OVERHEAD_BYTES = 96;

/** A JavaScript string in memory: two bytes a UTF-16 code unit (V8 keeps Latin-1 in one; this errs high). */
function stringBytes(text: string | undefined): number {
  return text === undefined ? 0 : text.length * 2;
}

/**
 * Approximately how many bytes `message` holds in memory: its texts (content, tool calls' names and
 * arguments, reasoning, thinking blocks, image data) at two bytes a code unit, plus a fixed cost per
 * object. Walks the message's fields once; never serialises it.
 */
export function estimateMessageBytes(message: Message): number {
  let bytes = MESSAGE_OVERHEAD_BYTES + stringBytes(message.toolCallId) + stringBytes(message.toolName);
  if (typeof message.content === "string") bytes += stringBytes(message.content);
  else {
    for (const part of message.content) {
      bytes += PART_OVERHEAD_BYTES;
      bytes += part.type === "text" ? stringBytes(part.text) : stringBytes(part.data) + stringBytes(part.url);
    }
  }
  for (const call of message.toolCalls ?? []) {
    bytes +=
      PART_OVERHEAD_BYTES + stringBytes(call.id) + stringBytes(call.name) + stringBytes(call.arguments);
  }
  bytes += stringBytes(message.reasoningContent);
  for (const block of message.thinkingBlocks ?? []) {
    bytes +=
      PART_OVERHEAD_BYTES +
      (block.type === "thinking"
        ? stringBytes(block.thinking) + stringBytes(block.signature)
        : stringBytes(block.data));
  }
  return bytes;
}

/** {@link estimateMessageBytes} summed over `messages`. */
export function estimateMessagesBytes(messages: readonly Message[]): number {
  let bytes = 0;
  for (const message of messages) bytes += estimateMessageBytes(message);
  return bytes;
}
