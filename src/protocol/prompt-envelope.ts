import { z } from "zod";
import { describeError } from "../errors/describe-error.js";

/**
 * The prompt request of the Agent Protocol (§5): plain UTF-8 text, or the JSON envelope
 * `{"prompt": "...", "attachments": [{"filename", "content": <padded base64>}]}` it is shorthand
 * for. Unknown envelope fields are kept (`passthrough`), as the spec asks.
 */

const STANDARD_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A file name that names no directory: no path separator or NUL, not `.` or `..`. */
const UNSAFE_FILENAME = /[/\\\0]/;

export const PromptAttachment = z.looseObject({
  filename: z
    .string()
    .min(1, { error: "must not be empty" })
    .refine((name) => !UNSAFE_FILENAME.test(name) && name !== "." && name !== "..", {
      error: "must be a bare file name (no path separator, NUL, '.' or '..')",
    }),
  content: z.string().regex(STANDARD_BASE64, { error: "must be standard padded base64" }),
});
export type PromptAttachment = z.infer<typeof PromptAttachment>;

export const PromptEnvelope = z.looseObject({
  prompt: z.string().min(1, { error: "must be a non-empty string" }),
  attachments: z.array(PromptAttachment).optional(),
});
export type PromptEnvelope = z.infer<typeof PromptEnvelope>;

/** A parsed prompt, or the 400 reason. */
export type PromptParse = { ok: true; value: PromptEnvelope } | { ok: false; reason: string };

/**
 * Reads a prompt payload the way the protocol's reference decoders do (§5.3), so a payload means
 * the same to every agent on the system:
 *
 * - an empty payload is a client error;
 * - a payload whose first byte after ASCII whitespace (tab, LF, CR, space) is `{` committed to
 *   JSON: it must parse as an envelope with a non-empty string `prompt`, else it is a 400 — never
 *   taken as text;
 * - anything else is the prompt text itself, verbatim: a prompt of only spaces is a prompt.
 */
export function parsePromptPayload(data: string): PromptParse {
  if (data === "")
    return { ok: false, reason: "empty payload: a prompt is non-empty text or a JSON envelope" };
  let envelope: PromptEnvelope = { prompt: data };
  if (startsWithJsonObject(data)) {
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch (error) {
      const detail = describeError(error);
      return {
        ok: false,
        reason: `malformed JSON envelope (a payload starting with "{" is JSON): ${detail}`,
      };
    }
    const parsed = PromptEnvelope.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      const field = issue?.path.map(String).join(".") ?? "";
      return { ok: false, reason: `bad envelope: field "${field}": ${issue?.message ?? "invalid"}` };
    }
    envelope = parsed.data;
  }
  if (!envelope.prompt.isWellFormed()) {
    return { ok: false, reason: "the prompt must be well-formed Unicode text (it holds a lone surrogate)" };
  }
  return { ok: true, value: envelope };
}

/** Whether the first byte after ASCII whitespace is `{` (only these four count as whitespace). */
function startsWithJsonObject(data: string): boolean {
  for (const char of data) {
    if (char === " " || char === "\t" || char === "\n" || char === "\r") continue;
    return char === "{";
  }
  return false;
}
