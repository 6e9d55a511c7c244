import type { ContentPart, GenerateResponse, Message } from "../llm/types.js";

/**
 * Our messages in the GenAI conventions' message shape, for the opt-in content attributes
 * (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`). Span
 * attributes cannot hold structures yet, so each is recorded as a JSON string, as the
 * convention allows.
 *
 * @see https://github.com/open-telemetry/semantic-conventions/blob/main/docs/gen-ai/gen-ai-input-messages.json
 * @see https://github.com/open-telemetry/semantic-conventions/blob/main/docs/gen-ai/gen-ai-output-messages.json
 */

type GenAiPart =
  | { type: "text"; content: string }
  | { type: "reasoning"; content: string }
  | { type: "tool_call"; id: string; name: string; arguments: unknown }
  | { type: "tool_call_response"; id: string | null; response: unknown }
  | { type: "blob"; modality: "image"; mime_type: string | null; content: string }
  | { type: "file_data"; modality: "image"; mime_type: string | null; uri: string };

interface GenAiMessage {
  role: string;
  parts: GenAiPart[];
  finish_reason?: string;
}

/** A JSON string parsed when it is JSON (the convention asks for structure), else kept as text. */
function parsedOrText(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function contentParts(content: string | ContentPart[]): GenAiPart[] {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", content }];
  return content.map((part): GenAiPart => {
    if (part.type === "text") return { type: "text", content: part.text };
    const mimeType = part.mediaType ?? null;
    if (part.data !== undefined)
      return { type: "blob", modality: "image", mime_type: mimeType, content: part.data };
    return { type: "file_data", modality: "image", mime_type: mimeType, uri: part.url ?? "" };
  });
}

function toGenAiMessage(message: Message): GenAiMessage {
  if (message.role === "tool") {
    return {
      role: "tool",
      parts: [
        {
          type: "tool_call_response",
          id: message.toolCallId ?? null,
          response: typeof message.content === "string" ? parsedOrText(message.content) : message.content,
        },
      ],
    };
  }
  const parts: GenAiPart[] = [];
  if (message.reasoningContent) parts.push({ type: "reasoning", content: message.reasoningContent });
  parts.push(...contentParts(message.content));
  for (const call of message.toolCalls ?? []) {
    parts.push({ type: "tool_call", id: call.id, name: call.name, arguments: parsedOrText(call.arguments) });
  }
  return { role: message.role, parts };
}

/** The request's messages, split as the convention wants: system instructions apart from the chat. */
export function requestContent(messages: readonly Message[]): { system?: string; input: string } {
  const system = messages.filter((message) => message.role === "system");
  const chat = messages.filter((message) => message.role !== "system");
  return {
    ...(system.length > 0
      ? { system: JSON.stringify(system.flatMap((message) => contentParts(message.content))) }
      : {}),
    input: JSON.stringify(chat.map(toGenAiMessage)),
  };
}

/** The model's answer as one output message. */
export function responseContent(response: GenerateResponse): string {
  const message = toGenAiMessage({
    role: "assistant",
    content: response.content,
    toolCalls: response.toolCalls,
    ...(response.reasoningContent ? { reasoningContent: response.reasoningContent } : {}),
  });
  return JSON.stringify([{ ...message, finish_reason: response.finishReason ?? "stop" }]);
}

/** One text message (the user's text on the agent span, the chat's answer). */
export function textContent(role: "user" | "assistant", text: string, finishReason?: string): string {
  const message: GenAiMessage = { role, parts: [{ type: "text", content: text }] };
  if (finishReason !== undefined) message.finish_reason = finishReason;
  return JSON.stringify([message]);
}
