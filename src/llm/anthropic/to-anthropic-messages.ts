import type {
  ContentBlockParam,
  ImageBlockParam,
  MessageParam,
  TextBlockParam,
  ToolResultBlockParam,
} from "@anthropic-ai/sdk/resources/messages";
import { type ContentPart, type Message, type ToolCall, textOf } from "../types.js";

/** The conversation part of a Messages API request body. */
export interface AnthropicPrompt {
  /** The leading system message(s), joined; absent when there are none. */
  system?: string;
  /** Strictly alternating user/assistant turns. */
  messages: MessageParam[];
}

export interface ToAnthropicMessagesOptions {
  /** Put a prompt-cache breakpoint on the last content block of the last message. */
  promptCaching?: boolean;
}

type Turn = { role: "user" | "assistant"; content: ContentBlockParam[] };

/**
 * Common messages → Anthropic `system` + `messages`.
 *
 * - The system messages at the start of the list become the top-level `system` field (joined by
 *   a blank line). A system message later in the conversation becomes user text: every Claude
 *   model and Anthropic-compatible server accepts that, not all accept a mid-conversation system
 *   turn.
 * - Assistant turns are `[thinking blocks…, text, tool_use…]`: thinking and redacted_thinking
 *   blocks are replayed verbatim (with signatures) and first, as the API requires; tool_use
 *   `input` is the parsed arguments (`{}` when they are not a JSON object).
 * - Tool messages become `tool_result` blocks in a user turn. Consecutive turns of one role are
 *   merged, so a run of tool results and the user text after it form ONE user message, in
 *   history order (the tool results first, as the API requires).
 * - Empty text is left out (the API rejects empty text blocks); a turn left with no content is
 *   dropped.
 *
 * @see https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use#handling-tool-use-and-tool-result-content-blocks
 * @see https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking#preserving-thinking-blocks
 */
export function toAnthropicMessages(
  messages: readonly Message[],
  options: ToAnthropicMessagesOptions = {},
): AnthropicPrompt {
  let start = 0;
  const systemTexts: string[] = [];
  while (start < messages.length && messages[start]?.role === "system") {
    const text = textOf(messages[start]?.content ?? "");
    if (text !== "") systemTexts.push(text);
    start++;
  }

  const turns: Turn[] = [];
  for (const message of messages.slice(start)) {
    const turn = toTurn(message);
    if (turn.content.length === 0) continue;
    const previous = turns.at(-1);
    if (previous && previous.role === turn.role) previous.content.push(...turn.content);
    else turns.push(turn);
  }

  if (options.promptCaching) addCacheBreakpoint(turns);
  const prompt: AnthropicPrompt = { messages: turns };
  if (systemTexts.length > 0) prompt.system = systemTexts.join("\n\n");
  return prompt;
}

function toTurn(message: Message): Turn {
  switch (message.role) {
    case "system":
    case "user":
      return { role: "user", content: toUserBlocks(message.content) };
    case "assistant":
      return { role: "assistant", content: toAssistantBlocks(message) };
    case "tool":
      return { role: "user", content: [toToolResult(message)] };
  }
}

function toUserBlocks(content: string | ContentPart[]): ContentBlockParam[] {
  if (typeof content === "string") return content === "" ? [] : [{ type: "text", text: content }];
  const blocks: ContentBlockParam[] = [];
  for (const part of content) {
    if (part.type === "text") {
      if (part.text !== "") blocks.push({ type: "text", text: part.text });
    } else {
      blocks.push(toImageBlock(part));
    }
  }
  return blocks;
}

function toImageBlock(part: Extract<ContentPart, { type: "image" }>): ImageBlockParam {
  if (part.data !== undefined) {
    return {
      type: "image",
      // The API validates the media type; passing it through lets it name the problem.
      source: { type: "base64", media_type: (part.mediaType ?? "image/png") as "image/png", data: part.data },
    };
  }
  return { type: "image", source: { type: "url", url: part.url ?? "" } };
}

function toAssistantBlocks(message: Message): ContentBlockParam[] {
  const blocks: ContentBlockParam[] = [];
  for (const block of message.thinkingBlocks ?? []) {
    blocks.push(
      block.type === "thinking"
        ? { type: "thinking", thinking: block.thinking, signature: block.signature }
        : { type: "redacted_thinking", data: block.data },
    );
  }
  blocks.push(...toUserBlocks(message.content));
  for (const call of message.toolCalls ?? []) {
    blocks.push({ type: "tool_use", id: call.id, name: call.name, input: parseToolInput(call) });
  }
  return blocks;
}

/** Anthropic wants `input` as an object; arguments that are not a JSON object become `{}`. */
function parseToolInput(call: ToolCall): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(call.arguments);
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
      return parsed as Record<string, unknown>;
    }
  } catch {
    // Not JSON (e.g. a call cut off by max_tokens): the result message will say what went wrong.
  }
  return {};
}

function toToolResult(message: Message): ToolResultBlockParam {
  const block: ToolResultBlockParam = { type: "tool_result", tool_use_id: message.toolCallId ?? "" };
  if (typeof message.content === "string") {
    if (message.content !== "") block.content = message.content;
    return block;
  }
  const content = toUserBlocks(message.content).filter(
    (part): part is TextBlockParam | ImageBlockParam => part.type === "text" || part.type === "image",
  );
  if (content.length > 0) block.content = content;
  return block;
}

/**
 * Marks the last content block of the last turn (the one that can carry `cache_control`:
 * thinking blocks cannot), so the whole prefix — tools, system, history — is cached.
 *
 * @see https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching
 */
function addCacheBreakpoint(turns: Turn[]): void {
  const content = turns.at(-1)?.content ?? [];
  for (let i = content.length - 1; i >= 0; i--) {
    const block = content[i];
    if (block && block.type !== "thinking" && block.type !== "redacted_thinking") {
      content[i] = { ...block, cache_control: { type: "ephemeral" } } as ContentBlockParam;
      return;
    }
  }
}
