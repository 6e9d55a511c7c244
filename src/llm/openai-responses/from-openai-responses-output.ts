import type { ToolCall } from "../types.js";
import type { ResponsesOutputItem } from "./openai-responses-wire.js";

/** What the output items of one response amount to in the common model. */
export interface ResponsesOutputSummary {
  content: string;
  toolCalls: ToolCall[];
  /** Reasoning summaries (or raw reasoning text), parts joined by a blank line; "" when none. */
  reasoning: string;
}

/** Text of a message item: its output_text parts (and refusals, which are the model's answer). */
export function messageItemText(item: Extract<ResponsesOutputItem, { type: "message" }>): string {
  return (item.content ?? []).map((part) => part.text ?? part.refusal ?? "").join("");
}

/** Reasoning parts of a reasoning item: its summaries, or its raw reasoning text when it has none. */
export function reasoningItemParts(item: Extract<ResponsesOutputItem, { type: "reasoning" }>): string[] {
  const summaries = (item.summary ?? []).map((part) => part.text);
  return summaries.length > 0 ? summaries : (item.content ?? []).map((part) => part.text);
}

/**
 * Folds a response's output items, in output order, into content, tool calls and reasoning.
 * Items of other kinds (built-in tool calls we never offer) are skipped.
 */
export function fromOpenAIResponsesOutput(items: readonly ResponsesOutputItem[]): ResponsesOutputSummary {
  let content = "";
  const toolCalls: ToolCall[] = [];
  const reasoning: string[] = [];
  for (const item of items) {
    if (item.type === "message") content += messageItemText(item);
    else if (item.type === "function_call") {
      toolCalls.push({ id: item.call_id, name: item.name, arguments: item.arguments ?? "" });
    } else if (item.type === "reasoning")
      reasoning.push(...reasoningItemParts(item).filter((part) => part !== ""));
  }
  return { content, toolCalls, reasoning: reasoning.join("\n\n") };
}
