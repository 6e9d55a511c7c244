import type { Message } from "../llm/types.js";
import { wellFormedMessage } from "../llm/well-formed-message.js";
import { CorruptHistoryError } from "./history-errors.js";
import { MessageSchema } from "./message-schema.js";

/** Where a stored message was read: its history and its position there (row or stream sequence). */
export interface StoredMessagePlace {
  agent: string;
  session: string;
  position: number;
}

/**
 * What a history stores of `messages`: system messages left out (the system prompt is rebuilt
 * from options and ToolSets at each start) and lone surrogates replaced (see {@link wellFormedMessage}).
 */
export function storableMessages(messages: readonly Message[]): Message[] {
  return messages.filter((message) => message.role !== "system").map(wellFormedMessage);
}

/**
 * A message read back from storage (parsed JSON), validated, and healed: a message written before
 * lone surrogates were refused would poison every request.
 * @throws CorruptHistoryError when it is not a message, or a system message.
 */
export function parseStoredMessage(json: unknown, where: StoredMessagePlace): Message {
  const message = MessageSchema.safeParse(json);
  if (!message.success) {
    const issues = message.error.issues.map(
      (issue) => `${issue.path.join(".") || "(message)"}: ${issue.message}`,
    );
    throw new CorruptHistoryError(where, `not a valid message: ${issues.join("; ")}`, message.error);
  }
  if (message.data.role === "system") {
    throw new CorruptHistoryError(where, "a system message was stored (system prompts are never persisted)");
  }
  return wellFormedMessage(message.data);
}
