/**
 * Anthropic `stop_reason` → the common finish reason ("stop" | "tool_calls" | "length" |
 * "content_filter"); reasons without a common equivalent (e.g. `pause_turn`) pass through as they
 * are so the caller can still see them. Null (not yet known) → undefined.
 *
 * @see https://docs.anthropic.com/en/api/handling-stop-reasons
 */
export function mapStopReason(stopReason: string | null | undefined): string | undefined {
  switch (stopReason) {
    case null:
    case undefined:
      return undefined;
    case "end_turn":
    case "stop_sequence":
      return "stop";
    case "tool_use":
      return "tool_calls";
    case "max_tokens":
    // The window filled up while the model was writing: the output was cut, as with max_tokens.
    case "model_context_window_exceeded":
      return "length";
    case "refusal":
      return "content_filter";
    default:
      return stopReason;
  }
}
