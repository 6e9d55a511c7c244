import type { ErrorCode } from "../bus/contract.js";
import { mappingOf } from "../errors/error-code.js";
import { toErrorInfo } from "../errors/error-info.js";
import { sliceCodePoints } from "../text/truncate-text.js";

/** A failure as it goes back to a caller: a stable code and one line of text. */
export interface SessionError {
  code: ErrorCode;
  message: string;
}

const MAX_MESSAGE_LENGTH = 1_000;

/**
 * Maps what a chat, compaction or reset rejected with to a reply error through the code table
 * (src/errors/error-code.ts): `cancelled` for a cancelled chat, `llm_error` when the model request
 * failed (a ChatFailedError takes its cause's code), `internal` for anything else.
 */
export function describeFailure(error: unknown): SessionError {
  const info = toErrorInfo(error);
  return { code: mappingOf(info.code).reply, message: oneLine(info.message) };
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, " ").trim() || "unknown error";
  return line.length > MAX_MESSAGE_LENGTH ? `${sliceCodePoints(line, MAX_MESSAGE_LENGTH)}…` : line;
}
