import type { Message } from "./types.js";
import { textOf } from "./types.js";

/** A provider-free token estimate: one token per four characters, rounded up. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/** Estimated prompt tokens of a conversation: message text, tool calls and their arguments. */
export function estimatePromptTokens(messages: readonly Message[]): number {
  let characters = 0;
  for (const message of messages) {
    characters += textOf(message.content).length;
    for (const call of message.toolCalls ?? []) characters += call.name.length + call.arguments.length;
  }
  return Math.ceil(characters / 4);
}
