import type { ErrorCode } from "../bus/contract.js";
import * as llmErrors from "../llm/errors.js";
import { sliceCodePoints } from "../text/truncate-text.js";

/** A failure as it goes back to a caller: a stable code and one line of text. */
export interface SessionError {
  code: ErrorCode;
  message: string;
}

/** Class names of the LLM error hierarchy (a chat's failure carries only the name of its cause). */
const LLM_ERROR_NAMES: ReadonlySet<string> = new Set(
  Object.values(llmErrors).flatMap((value) =>
    typeof value === "function" && value.prototype instanceof llmErrors.LlmError ? [value.name] : [],
  ),
);

const MAX_MESSAGE_LENGTH = 1_000;

/**
 * Maps what a chat, compaction or reset rejected with to a reply error: `cancelled` for a
 * cancelled chat, `llm_error` when the model request failed (the agent's ChatFailedError names its
 * LLM cause in `info`), `internal` for anything else.
 */
export function describeFailure(error: unknown): SessionError {
  const message = oneLine(error instanceof Error ? error.message : String(error));
  if (isNamed(error, "ChatCancelledError") || isNamed(error, "CancelledError")) {
    return { code: "cancelled", message };
  }
  if (isLlmFailure(error)) return { code: "llm_error", message };
  return { code: "internal", message };
}

function isLlmFailure(error: unknown): boolean {
  if (llmErrors.isLlmError(error)) return true;
  if (!(error instanceof Error)) return false;
  if (llmErrors.isLlmError(error.cause)) return true;
  const info = (error as { info?: { name?: unknown } }).info;
  return typeof info?.name === "string" && LLM_ERROR_NAMES.has(info.name);
}

function isNamed(error: unknown, name: string): boolean {
  return error instanceof Error && error.name === name;
}

function oneLine(text: string): string {
  const line = text.replace(/\s+/g, " ").trim() || "unknown error";
  return line.length > MAX_MESSAGE_LENGTH ? `${sliceCodePoints(line, MAX_MESSAGE_LENGTH)}…` : line;
}
