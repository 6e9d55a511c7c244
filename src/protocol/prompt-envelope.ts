import { z } from "zod";

/**
 * The prompt request of the Agent Protocol (§5): plain UTF-8 text, or the JSON envelope
 * `{"prompt": "...", "attachments": [{"filename", "content": <padded base64>}]}` it is shorthand
 * for. Unknown envelope fields are kept (`passthrough`), as the spec asks.
 */

const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export const PromptAttachment = z.looseObject({
  filename: z.string().min(1, { error: "must not be empty" }),
  content: z.string().regex(STANDARD_BASE64, { error: "must be standard padded base64" }),
});
export type PromptAttachment = z.infer<typeof PromptAttachment>;

export const PromptEnvelope = z.looseObject({
  prompt: z.string(),
  attachments: z.array(PromptAttachment).optional(),
});
export type PromptEnvelope = z.infer<typeof PromptEnvelope>;

/** A parsed prompt, or the 400 reason. */
export type PromptParse = { ok: true; value: PromptEnvelope } | { ok: false; reason: string };

/**
 * Reads a prompt payload. A payload that is a JSON object is an envelope (and must be a valid
 * one); anything else is the prompt text itself. An empty (or blank) prompt is a client error.
 */
export function parsePromptPayload(data: string): PromptParse {
  let envelope: PromptEnvelope = { prompt: data };
  if (data.trimStart().startsWith("{")) {
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      json = undefined;
    }
    if (typeof json === "object" && json !== null) {
      const parsed = PromptEnvelope.safeParse(json);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        const field = issue?.path.map(String).join(".") ?? "";
        return { ok: false, reason: `bad envelope: field "${field}": ${issue?.message ?? "invalid"}` };
      }
      envelope = parsed.data;
    }
  }
  if (envelope.prompt.trim() === "") return { ok: false, reason: "empty prompt" };
  if (!envelope.prompt.isWellFormed()) {
    return { ok: false, reason: "the prompt must be well-formed Unicode text (it holds a lone surrogate)" };
  }
  return { ok: true, value: envelope };
}
