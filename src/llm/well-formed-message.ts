import type { ContentPart, GenerateResponse, Message, ToolCall } from "./types.js";

/**
 * Lone UTF-16 surrogates (half an emoji: from a model's JSON escape `\ud83d`, a careless tool,
 * an old history row) replaced by U+FFFD. Providers reject a body holding one with a 400, and the
 * conversation is replayed on every request, so one such character would poison a session for
 * good: everything that enters a conversation goes through here first. Already well-formed text
 * is returned as it is (no copy).
 */
export function toWellFormed(text: string): string {
  return text.isWellFormed() ? text : text.toWellFormed();
}

/**
 * `message` with its text, tool call arguments and reasoning well-formed ({@link toWellFormed});
 * the same object when nothing needed replacing. Thinking blocks are kept verbatim: they are
 * signed by the provider, and a changed one would be refused.
 */
export function wellFormedMessage(message: Message): Message {
  const content = wellFormedContent(message.content);
  const toolCalls = message.toolCalls === undefined ? undefined : wellFormedToolCalls(message.toolCalls);
  const reasoning =
    message.reasoningContent === undefined ? undefined : toWellFormed(message.reasoningContent);
  if (
    content === message.content &&
    toolCalls === message.toolCalls &&
    reasoning === message.reasoningContent
  ) {
    return message;
  }
  return {
    ...message,
    content,
    ...(toolCalls === undefined ? {} : { toolCalls }),
    ...(reasoning === undefined ? {} : { reasoningContent: reasoning }),
  };
}

/** A model's response with its text, tool call arguments and reasoning well-formed (see {@link wellFormedMessage}). */
export function wellFormedResponse(response: GenerateResponse): GenerateResponse {
  const content = toWellFormed(response.content);
  const toolCalls = wellFormedToolCalls(response.toolCalls);
  const reasoning =
    response.reasoningContent === undefined ? undefined : toWellFormed(response.reasoningContent);
  if (
    content === response.content &&
    toolCalls === response.toolCalls &&
    reasoning === response.reasoningContent
  ) {
    return response;
  }
  return {
    ...response,
    content,
    toolCalls,
    ...(reasoning === undefined ? {} : { reasoningContent: reasoning }),
  };
}

function wellFormedContent(content: string | ContentPart[]): string | ContentPart[] {
  if (typeof content === "string") return toWellFormed(content);
  let changed = false;
  const parts = content.map((part) => {
    if (part.type !== "text") return part;
    const text = toWellFormed(part.text);
    if (text === part.text) return part;
    changed = true;
    return { ...part, text };
  });
  return changed ? parts : content;
}

function wellFormedToolCalls(calls: ToolCall[]): ToolCall[] {
  let changed = false;
  const fixed = calls.map((call) => {
    const name = toWellFormed(call.name);
    const args = toWellFormed(call.arguments);
    if (name === call.name && args === call.arguments) return call;
    changed = true;
    return { ...call, name, arguments: args };
  });
  return changed ? fixed : calls;
}
