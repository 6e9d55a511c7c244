import type { Message } from "../llm/types.js";

/**
 * A session's working conversation: the messages sent with each request (without the
 * system prompt) and the tokens the last request used.
 */
export class Context {
  messages: Message[];
  /** Prompt + completion tokens of the last request: what the context costs now, never a sum. */
  tokenUsed: number;

  constructor(messages: readonly Message[] = [], tokenUsed = 0) {
    this.messages = [...messages];
    this.tokenUsed = tokenUsed;
  }

  /** A deep copy: compaction works on a fork so a failed compaction leaves this context untouched. */
  fork(): Context {
    return new Context(structuredClone(this.messages), this.tokenUsed);
  }

  /** Empties the context (`/new`). */
  clear(): void {
    this.messages = [];
    this.tokenUsed = 0;
  }
}
