import { imageUrlOf } from "../openai-shared/image-url-of.js";
import { type ContentPart, type Message, textOf } from "../types.js";

/** Request-side input items, as this backend sends them (a subset of the API's input union). */
export type ResponsesInputItem =
  | {
      type: "message";
      role: "user";
      content: Array<
        { type: "input_text"; text: string } | { type: "input_image"; image_url: string; detail: "auto" }
      >;
    }
  | { type: "message"; role: "assistant"; content: Array<{ type: "output_text"; text: string }> }
  | { type: "function_call"; call_id: string; name: string; arguments: string }
  | { type: "function_call_output"; call_id: string; output: string };

export interface ResponsesInput {
  /** The system message(s), joined by a blank line; undefined when there are none. */
  instructions?: string;
  input: ResponsesInputItem[];
}

function toUserContent(content: string | ContentPart[]) {
  const parts = typeof content === "string" ? [{ type: "text" as const, text: content }] : content;
  return parts.map((part) =>
    part.type === "text"
      ? { type: "input_text" as const, text: part.text }
      : { type: "input_image" as const, image_url: imageUrlOf(part), detail: "auto" as const },
  );
}

/**
 * Converts the common messages to `instructions` + `input` items. The request is stateless
 * (`store: false`), so the whole history is sent each time: assistant text as an `output_text`
 * message, each tool call as a `function_call` item and each tool result as a
 * `function_call_output` linked by `call_id`.
 *
 * Reasoning is not sent back: a reasoning item can only be replayed with its id or encrypted
 * content, which the common model does not keep, and the API accepts function calls without it.
 *
 * @see https://platform.openai.com/docs/guides/function-calling
 */
export function toOpenAIResponsesInput(messages: readonly Message[]): ResponsesInput {
  const instructions: string[] = [];
  const input: ResponsesInputItem[] = [];
  for (const message of messages) {
    switch (message.role) {
      case "system":
        instructions.push(textOf(message.content));
        break;
      case "user":
        input.push({ type: "message", role: "user", content: toUserContent(message.content) });
        break;
      case "assistant": {
        const text = textOf(message.content);
        if (text !== "")
          input.push({ type: "message", role: "assistant", content: [{ type: "output_text", text }] });
        for (const call of message.toolCalls ?? []) {
          input.push({ type: "function_call", call_id: call.id, name: call.name, arguments: call.arguments });
        }
        break;
      }
      case "tool":
        input.push({
          type: "function_call_output",
          call_id: message.toolCallId ?? "",
          output: textOf(message.content),
        });
        break;
    }
  }
  return { ...(instructions.length > 0 ? { instructions: instructions.join("\n\n") } : {}), input };
}
