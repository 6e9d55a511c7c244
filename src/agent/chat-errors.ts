import type { ErrorInfo } from "../events/types.js";
import type { TokenUsage } from "../llm/types.js";

/** A chat that ended in `failed`: `cause` names the underlying error (e.g. RateLimitError). */
export class ChatFailedError extends Error {
  readonly usage: TokenUsage;
  /** The underlying error as it travelled through the machine. */
  readonly info: ErrorInfo;

  constructor(info: ErrorInfo, usage: TokenUsage) {
    super(info.message);
    this.name = new.target.name;
    this.info = info;
    this.usage = usage;
  }
}

/** A chat that was cancelled (its signal aborted, or `stop`). */
export class ChatCancelledError extends Error {
  readonly usage: TokenUsage;

  constructor(usage: TokenUsage, message = "the chat was cancelled") {
    super(message);
    this.name = new.target.name;
    this.usage = usage;
  }
}
