/**
 * The parts of the Responses API wire format this backend reads, as zod schemas. Output items
 * and stream events of kinds we do not use (web search, images, MCP…) are recognised by `type`
 * and skipped; the kinds we use are validated strictly enough to build the response.
 *
 * @see https://platform.openai.com/docs/api-reference/responses-streaming
 */
import { z } from "zod";

export const ResponsesUsage = z.object({
  input_tokens: z.number().nullish(),
  output_tokens: z.number().nullish(),
  input_tokens_details: z.object({ cached_tokens: z.number().nullish() }).nullish(),
});
export type ResponsesUsage = z.infer<typeof ResponsesUsage>;

export const ResponsesMessageItem = z.object({
  type: z.literal("message"),
  content: z
    .array(z.object({ type: z.string(), text: z.string().nullish(), refusal: z.string().nullish() }))
    .nullish(),
});
export type ResponsesMessageItem = z.infer<typeof ResponsesMessageItem>;

export const ResponsesFunctionCallItem = z.object({
  type: z.literal("function_call"),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string().nullish(),
});
export type ResponsesFunctionCallItem = z.infer<typeof ResponsesFunctionCallItem>;

export const ResponsesReasoningItem = z.object({
  type: z.literal("reasoning"),
  summary: z.array(z.object({ text: z.string() })).nullish(),
  /** Raw reasoning text: open-weight models behind compatible servers send it instead of summaries. */
  content: z.array(z.object({ text: z.string() })).nullish(),
});
export type ResponsesReasoningItem = z.infer<typeof ResponsesReasoningItem>;

export const ResponsesError = z.object({
  code: z.string().nullish(),
  type: z.string().nullish(),
  message: z.string().nullish(),
});
export type ResponsesError = z.infer<typeof ResponsesError>;

export const ResponsesResponse = z.object({
  status: z.string().nullish(),
  output: z.array(z.unknown()).nullish(),
  usage: ResponsesUsage.nullish(),
  error: ResponsesError.nullish(),
  incomplete_details: z.object({ reason: z.string().nullish() }).nullish(),
});
export type ResponsesResponse = z.infer<typeof ResponsesResponse>;

/** Anything whose `type` is not in `known`: parsed as `{ type: "other" }` and skipped. */
function otherThan(known: readonly string[]) {
  return z
    .object({ type: z.string().refine((type) => !known.includes(type)) })
    .transform(() => ({ type: "other" as const }));
}

const ITEM_TYPES = ["message", "function_call", "reasoning"] as const;

/** One output item; item types this backend does not use parse to `{ type: "other" }`. */
export const ResponsesOutputItem = z.union([
  z.discriminatedUnion("type", [ResponsesMessageItem, ResponsesFunctionCallItem, ResponsesReasoningItem]),
  otherThan(ITEM_TYPES),
]);
export type ResponsesOutputItem = z.infer<typeof ResponsesOutputItem>;

const ItemEvent = z.object({
  type: z.literal(["response.output_item.added", "response.output_item.done"]),
  output_index: z.number(),
  item: ResponsesOutputItem,
});
const DeltaEvent = z.object({
  type: z.literal([
    "response.output_text.delta",
    "response.refusal.delta",
    "response.reasoning_text.delta",
    "response.function_call_arguments.delta",
  ]),
  output_index: z.number(),
  delta: z.string(),
});
const SummaryPartEvent = z.object({
  type: z.literal("response.reasoning_summary_part.added"),
  output_index: z.number(),
  summary_index: z.number(),
});
const SummaryDeltaEvent = z.object({
  type: z.literal("response.reasoning_summary_text.delta"),
  output_index: z.number(),
  summary_index: z.number(),
  delta: z.string(),
});
const ArgumentsDoneEvent = z.object({
  type: z.literal("response.function_call_arguments.done"),
  output_index: z.number(),
  arguments: z.string(),
});
const TerminalEvent = z.object({
  type: z.literal(["response.completed", "response.incomplete", "response.failed"]),
  response: ResponsesResponse,
});
/** OpenAI's `error` event has its fields at the top level; some servers nest them in `error`. */
const ErrorEvent = ResponsesError.extend({ type: z.literal("error"), error: ResponsesError.nullish() });

const KnownEvent = z.discriminatedUnion("type", [
  ItemEvent,
  DeltaEvent,
  SummaryPartEvent,
  SummaryDeltaEvent,
  ArgumentsDoneEvent,
  TerminalEvent,
  ErrorEvent,
]);

/** One stream event; event types this backend does not act on parse to `{ type: "other" }`. */
export const ResponsesStreamEvent = z.union([
  KnownEvent,
  otherThan([...KnownEvent.options.flatMap((option) => [...option.shape.type.values])]),
]);
export type ResponsesStreamEvent = z.infer<typeof ResponsesStreamEvent>;
