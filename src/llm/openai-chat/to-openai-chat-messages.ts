import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionContentPart,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";
import { imageUrlOf } from "../openai-shared/image-url-of.js";
import { type ContentPart, type Message, textOf } from "../types.js";

/**
 * An assistant message as sent back. `reasoning_content` is a DeepSeek extension: in thinking
 * mode it must be replayed on every assistant turn that made tool calls, or the API answers 400.
 */
type AssistantMessage = ChatCompletionAssistantMessageParam & { reasoning_content?: string };

function toUserContent(content: string | ContentPart[]): string | ChatCompletionContentPart[] {
  if (typeof content === "string") return content;
  return content.map(
    (part): ChatCompletionContentPart =>
      part.type === "text"
        ? { type: "text", text: part.text }
        : { type: "image_url", image_url: { url: imageUrlOf(part) } },
  );
}

function toAssistantMessage(message: Message): AssistantMessage {
  const text = textOf(message.content);
  const toolCalls = message.toolCalls ?? [];
  if (toolCalls.length === 0) return { role: "assistant", content: text };
  return {
    role: "assistant",
    // OpenAI wants null rather than "" beside tool calls.
    content: text === "" ? null : text,
    tool_calls: toolCalls.map((call) => ({
      id: call.id,
      type: "function",
      function: { name: call.name, arguments: call.arguments },
    })),
    // Only turns with tool calls: DeepSeek ignores the rest, and its older reasoner rejected it.
    ...(message.reasoningContent ? { reasoning_content: message.reasoningContent } : {}),
  };
}

/**
 * Converts the common messages to Chat Completions messages, in order. System messages stay
 * where they are (role "system", which OpenAI maps to "developer" for reasoning models); tool
 * results keep only their text.
 *
 * @see https://platform.openai.com/docs/api-reference/chat/create#chat-create-messages
 */
export function toOpenAIChatMessages(messages: readonly Message[]): ChatCompletionMessageParam[] {
  return messages.map(toOpenAIChatMessage);
}

function toOpenAIChatMessage(message: Message): ChatCompletionMessageParam {
  if (message.role === "system") return { role: "system", content: textOf(message.content) };
  if (message.role === "user") return { role: "user", content: toUserContent(message.content) };
  if (message.role === "assistant") return toAssistantMessage(message);
  return { role: "tool", tool_call_id: message.toolCallId ?? "", content: textOf(message.content) };
}
