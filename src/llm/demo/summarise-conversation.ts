import type { Message } from "../types.js";
import { textOf } from "../types.js";
import { shorten } from "./derive-plan.js";

const MAX_REQUESTS_LISTED = 5;

/**
 * The demo model's deterministic summary of a conversation (the messages before the compaction
 * instruction, system prompt excluded): its size, what the user asked, which tools ran and the
 * last answer.
 */
export function summariseConversation(messages: readonly Message[]): string {
  const conversation = messages.filter((message) => message.role !== "system");
  if (conversation.length === 0) return "[demo] Summary: the conversation is empty so far.";
  const requests = conversation
    .filter((message) => message.role === "user")
    .map((message) => shorten(textOf(message.content).replace(/\s+/g, " ").trim(), 100));
  const toolCounts = new Map<string, number>();
  for (const message of conversation) {
    for (const call of message.toolCalls ?? [])
      toolCounts.set(call.name, (toolCounts.get(call.name) ?? 0) + 1);
  }
  const lastAnswer = conversation
    .filter((message) => message.role === "assistant" && textOf(message.content).trim() !== "")
    .at(-1);

  const lines = [`[demo] Summary of the conversation so far (${conversation.length} messages).`];
  if (requests.length > 0) {
    lines.push("The user asked:");
    const listed = requests.slice(-MAX_REQUESTS_LISTED);
    if (listed.length < requests.length)
      lines.push(`- (${requests.length - listed.length} earlier requests)`);
    for (const request of listed) lines.push(`- "${request}"`);
  }
  if (toolCounts.size > 0) {
    const tools = [...toolCounts].map(([name, count]) => `${name} ×${count}`).join(", ");
    lines.push(`Tools called: ${tools}.`);
  }
  if (lastAnswer) {
    lines.push(`Last answer: "${shorten(textOf(lastAnswer.content).replace(/\s+/g, " ").trim(), 200)}"`);
  }
  return lines.join("\n");
}
