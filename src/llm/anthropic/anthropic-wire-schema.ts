import { z } from "zod";

/**
 * The parts of Anthropic's Messages API responses this adapter reads, validated as they come in.
 * Objects are not strict: the API adds fields often and an unknown field must not fail a request.
 * Content blocks, deltas and events of types we do not use (server tools, citations, newer
 * events) parse to `{ type: "unknown" }` and are skipped; a block of a type we do use but with
 * the wrong shape fails validation.
 *
 * @see https://docs.anthropic.com/en/api/messages
 * @see https://docs.anthropic.com/en/docs/build-with-claude/streaming
 */

/**
 * `known` or, for a `type` outside `knownTypes`, `{ type: "unknown" }` (forward compatibility
 * without swallowing malformed members of the known types).
 */
function orUnknown<T extends z.ZodType>(known: T, knownTypes: readonly string[]) {
  return z.union([
    known,
    z
      .object({ type: z.string().refine((type) => !knownTypes.includes(type)) })
      .transform(() => ({ type: "unknown" as const })),
  ]);
}

/** Token counts; in `message_delta` events each field is cumulative and may be null. */
export const AnthropicUsage = z.object({
  input_tokens: z.number().nullish(),
  output_tokens: z.number().nullish(),
  cache_read_input_tokens: z.number().nullish(),
  cache_creation_input_tokens: z.number().nullish(),
});
export type AnthropicUsage = z.infer<typeof AnthropicUsage>;

export const AnthropicContentBlock = orUnknown(
  z.discriminatedUnion("type", [
    z.object({ type: z.literal("text"), text: z.string() }),
    z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string().default("") }),
    z.object({ type: z.literal("redacted_thinking"), data: z.string() }),
    z.object({ type: z.literal("tool_use"), id: z.string(), name: z.string(), input: z.unknown() }),
  ]),
  ["text", "thinking", "redacted_thinking", "tool_use"],
);
export type AnthropicContentBlock = z.infer<typeof AnthropicContentBlock>;

/** A non-streaming `POST /v1/messages` response. */
export const AnthropicMessageResponse = z.object({
  content: z.array(AnthropicContentBlock),
  stop_reason: z.string().nullish(),
  usage: AnthropicUsage,
});
export type AnthropicMessageResponse = z.infer<typeof AnthropicMessageResponse>;

export const AnthropicContentDelta = orUnknown(
  z.discriminatedUnion("type", [
    z.object({ type: z.literal("text_delta"), text: z.string() }),
    z.object({ type: z.literal("thinking_delta"), thinking: z.string() }),
    z.object({ type: z.literal("signature_delta"), signature: z.string() }),
    z.object({ type: z.literal("input_json_delta"), partial_json: z.string() }),
  ]),
  ["text_delta", "thinking_delta", "signature_delta", "input_json_delta"],
);
export type AnthropicContentDelta = z.infer<typeof AnthropicContentDelta>;

const blockIndex = z.number().int().nonnegative();

/** One server-sent event of a streamed response (`ping` and `error` are handled by the SDK). */
export const AnthropicStreamEvent = orUnknown(
  z.discriminatedUnion("type", [
    z.object({ type: z.literal("message_start"), message: z.object({ usage: AnthropicUsage.nullish() }) }),
    z.object({
      type: z.literal("content_block_start"),
      index: blockIndex,
      content_block: AnthropicContentBlock,
    }),
    z.object({ type: z.literal("content_block_delta"), index: blockIndex, delta: AnthropicContentDelta }),
    z.object({ type: z.literal("content_block_stop"), index: blockIndex }),
    z.object({
      type: z.literal("message_delta"),
      delta: z.object({ stop_reason: z.string().nullish() }),
      usage: AnthropicUsage.nullish(),
    }),
    z.object({ type: z.literal("message_stop") }),
  ]),
  [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
  ],
);
export type AnthropicStreamEvent = z.infer<typeof AnthropicStreamEvent>;
