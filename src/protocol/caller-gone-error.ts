import { AgentloopError } from "../errors/agentloop-error.js";

/**
 * Why a streamed prompt's signal aborted: its caller stopped listening on the reply subject (the
 * protocol's only way to cancel), so the chat it asked for is cancelled.
 */
export class CallerGoneError extends AgentloopError {
  readonly code = "cancelled";
  readonly retryable = false;
  /** The reply subject nobody listens on any more. */
  readonly replySubject: string;

  constructor(replySubject: string) {
    super("the caller went away (unsubscribed from its reply subject)");
    this.replySubject = replySubject;
  }
}
