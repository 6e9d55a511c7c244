import type { ResponsesResponse } from "./openai-responses-wire.js";

/**
 * The common finish reason of a finished response. The Responses API has no finish reason: a
 * completed response stopped or called tools; an incomplete one ran out of output tokens
 * ("length") or was filtered ("content_filter").
 */
export function mapOpenAIResponsesFinishReason(response: ResponsesResponse, hasToolCalls: boolean): string {
  if (response.status === "incomplete") {
    return response.incomplete_details?.reason === "content_filter" ? "content_filter" : "length";
  }
  return hasToolCalls ? "tool_calls" : "stop";
}
