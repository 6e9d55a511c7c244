/**
 * Normalises a Chat Completions `finish_reason` to the common vocabulary ("stop", "tool_calls",
 * "length", "content_filter"; anything else passes through). A few compatible servers (older
 * Ollama among them) say "stop" although the model called tools; the calls decide.
 */
export function mapOpenAIChatFinishReason(reason: string, hasToolCalls: boolean): string {
  switch (reason) {
    case "tool_calls":
    case "function_call":
      return "tool_calls";
    case "stop":
    case "eos":
      return hasToolCalls ? "tool_calls" : "stop";
    case "length":
    case "max_tokens":
      return "length";
    case "content_filter":
      return "content_filter";
    default:
      return reason;
  }
}
