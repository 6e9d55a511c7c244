import { AgentloopError } from "../errors/agentloop-error.js";
import type { AgentloopErrorCode } from "../errors/error-code.js";
import type { ErrorInfo } from "../errors/error-info.js";
import type { TokenUsage } from "../llm/types.js";

/**
 * A chat that ended in `failed`. It takes its cause's `code`, `retryable` and `status` (a chat
 * failed by a rate limit is `rate_limit`), so replies and exit codes follow the cause; `info`
 * is the cause as it travelled through the machine (e.g. its `name`, RateLimitError).
 */
export class ChatFailedError extends AgentloopError {
  readonly code: AgentloopErrorCode;
  readonly retryable: boolean;
  readonly usage: TokenUsage;
  /** The underlying error as it travelled through the machine. */
  readonly info: ErrorInfo;

  constructor(info: ErrorInfo, usage: TokenUsage) {
    super(info.message, info.status === undefined ? {} : { status: info.status });
    this.code = info.code;
    this.retryable = info.retryable;
    this.info = info;
    this.usage = usage;
  }
}

/** A chat that was cancelled (its signal aborted, or `stop`). */
export class ChatCancelledError extends AgentloopError {
  readonly code = "cancelled";
  readonly retryable = false;
  readonly usage: TokenUsage;

  constructor(usage: TokenUsage, message = "the chat was cancelled") {
    super(message);
    this.usage = usage;
  }
}
