import { z } from "zod";
import type { Message } from "../llm/types.js";

/**
 * zod schemas of the common message model (`src/llm/types.ts`), for validating messages that come
 * back from storage. Unknown keys are stripped; a field that is present must have the right type.
 */

export const ToolCallSchema = z.object({
  id: z.string(),
  name: z.string(),
  arguments: z.string(),
});

export const ThinkingBlockSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("thinking"), thinking: z.string(), signature: z.string() }),
  z.object({ type: z.literal("redacted_thinking"), data: z.string() }),
]);

export const ContentPartSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text"), text: z.string() }),
  z.object({
    type: z.literal("image"),
    mediaType: z.string().optional(),
    data: z.string().optional(),
    url: z.string().optional(),
  }),
]);

export const MessageSchema = z.object({
  role: z.enum(["system", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(ContentPartSchema)]),
  toolCalls: z.array(ToolCallSchema).optional(),
  reasoningContent: z.string().optional(),
  thinkingBlocks: z.array(ThinkingBlockSchema).optional(),
  toolCallId: z.string().optional(),
  toolName: z.string().optional(),
});

// Fails to compile when the schema and the shared Message type drift apart.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const schemaMatchesMessage: Same<z.infer<typeof MessageSchema>, Message> = true;
// Structural typing ignores extra optional fields, so compare the key sets too.
const schemaHasMessageKeys: Same<keyof z.infer<typeof MessageSchema>, keyof Message> = true;
void schemaMatchesMessage;
void schemaHasMessageKeys;
