import { AgentloopError } from "./agentloop-error.js";

/**
 * A session's messages hold more than the host's `--max-session-bytes` in memory, even after the
 * host compacted them before this chat: the chat is refused (`bad_request`). Starting over (`new`)
 * or a compaction with a narrower topic brings the session under the limit.
 */
export class SessionTooLargeError extends AgentloopError {
  readonly code = "session_too_large";
  readonly retryable = false;
  /** What the session holds, in bytes (an estimate). */
  readonly bytes: number;
  readonly maxSessionBytes: number;

  constructor(bytes: number, maxSessionBytes: number, compactionFailure?: string) {
    const after =
      compactionFailure === undefined
        ? "after compaction"
        : `and compacting it failed (${compactionFailure})`;
    super(
      `the session holds about ${bytes} bytes ${after}, over the host's limit of ${maxSessionBytes} bytes per session; send "new" to start over`,
    );
    this.bytes = bytes;
    this.maxSessionBytes = maxSessionBytes;
  }
}
