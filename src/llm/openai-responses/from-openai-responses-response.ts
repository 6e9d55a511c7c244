import { z } from "zod";
import { errorFromProviderError } from "../openai-shared/error-from-provider-error.js";
import { parseWire } from "../openai-shared/parse-wire.js";
import type { GenerateResponse } from "../types.js";
import { fromOpenAIResponsesOutput } from "./from-openai-responses-output.js";
import { fromOpenAIResponsesUsage } from "./from-openai-responses-usage.js";
import { mapOpenAIResponsesFinishReason } from "./map-openai-responses-finish-reason.js";
import { ResponsesOutputItem, type ResponsesResponse } from "./openai-responses-wire.js";

const OutputItems = z.array(ResponsesOutputItem);

/**
 * A whole Responses API response object → the common response. A failed response throws the
 * error it carries (mapped by code); an incomplete one is returned with its finish reason.
 */
export function fromOpenAIResponsesResponse(response: ResponsesResponse): GenerateResponse {
  if (response.status === "failed") {
    throw errorFromProviderError(response.error ?? { message: "the model's response failed" });
  }
  const items = parseWire(OutputItems, response.output ?? [], "response output");
  const { content, toolCalls, reasoning } = fromOpenAIResponsesOutput(items);
  return {
    content,
    toolCalls,
    ...(reasoning ? { reasoningContent: reasoning } : {}),
    finishReason: mapOpenAIResponsesFinishReason(response, toolCalls.length > 0),
    usage: fromOpenAIResponsesUsage(response.usage),
  };
}
