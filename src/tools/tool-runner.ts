import { type ErrorInfo, toErrorInfo } from "../errors/error-info.js";
import type { Message, ToolCall } from "../llm/types.js";
import { toWellFormed } from "../llm/well-formed-message.js";
import { NO_SECRETS, type SecretRedactor } from "../text/secret-redactor.js";
import { sliceCodePoints, truncateText } from "../text/truncate-text.js";
import { AgentCallError, ToolCancelledError, ToolError, ToolNotFoundError } from "./tool-errors.js";
import type { ToolContext, ToolSet } from "./tool-set.js";

/** Results longer than this reach the model truncated, with a marker, so one tool cannot fill the context. */
export const TOOL_RESULT_LIMIT = 8_000;
/** Error messages the model sees are capped at about this many characters. */
export const TOOL_ERROR_MESSAGE_LIMIT = 500;
/** The result text of a call that was cancelled or never finished: every call in the history has a result, or the provider refuses the next request. */
export const CANCELLED_TOOL_RESULT = JSON.stringify({ error: "cancelled" });

/** What became of one tool call: the text the model sees, and the error for events when it failed. */
export interface ToolCallOutcome {
  callId: string;
  toolName: string;
  /** True when the tool ran and returned a result. */
  ok: boolean;
  /** True when the call was cancelled (then `ok` is false and `result` is {@link CANCELLED_TOOL_RESULT}). */
  cancelled: boolean;
  /** The text the model sees, already truncated; `{"error": "…"}` when the call failed. */
  result: string;
  /** For `ToolCallFailed`: the error's class name and its sanitised message. */
  error?: ErrorInfo;
  /** The failure ends the chat (a {@link ToolError} made with `failsChat`); `error` says why. */
  failsChat?: true;
}

export interface RunToolCallOptions {
  /** Hides the configured secrets in the result and the error message. Default: none. */
  redactor?: SecretRedactor;
}

/**
 * Runs one tool call against the first ToolSet that offers its name and never throws: an unknown
 * tool, invalid arguments or a throwing tool become an `{"error": "…"}` result the model can react
 * to. An aborted `context.signal` resolves at once with a cancelled outcome, even when
 * the tool ignores the signal (its late result is discarded).
 *
 * What a tool returns becomes the model's input, the session's history and an event: so secrets
 * are redacted from it first, lone surrogates replaced (see {@link toWellFormed}), then it is cut.
 */
export async function runToolCall(
  call: ToolCall,
  toolSets: readonly ToolSet[],
  context: ToolContext,
  options: RunToolCallOptions = {},
): Promise<ToolCallOutcome> {
  const redactor = options.redactor ?? NO_SECRETS;
  if (context.signal.aborted) return cancelledOutcome(call.id, call.name);
  const toolSet = toolSets.find((set) => set.tools().some((tool) => tool.name === call.name));
  if (toolSet === undefined) return failedOutcome(call, new ToolNotFoundError(call.name), redactor);

  let invocation: Promise<string>;
  try {
    invocation = toolSet.invoke(call, context);
  } catch (error) {
    // A ToolSet that throws synchronously instead of rejecting.
    return context.signal.aborted
      ? cancelledOutcome(call.id, call.name)
      : failedOutcome(call, error, redactor);
  }
  const settled = await untilAborted(invocation, context.signal);
  if (settled === "aborted") return cancelledOutcome(call.id, call.name);
  if (settled.ok) {
    return {
      callId: call.id,
      toolName: call.name,
      ok: true,
      cancelled: false,
      result: truncateToolResult(toWellFormed(redactor.redact(settled.value))),
    };
  }
  // A tool that gave up because of the abort reports cancellation, not a failure of its own.
  if (context.signal.aborted) return cancelledOutcome(call.id, call.name);
  return failedOutcome(call, settled.error, redactor);
}

/** The outcome of a call that was cancelled or never ran to the end. */
export function cancelledOutcome(callId: string, toolName: string): ToolCallOutcome {
  const error = new ToolCancelledError(toolName);
  return {
    callId,
    toolName,
    ok: false,
    cancelled: true,
    result: CANCELLED_TOOL_RESULT,
    error: toErrorInfo(error),
  };
}

/**
 * The tool-result message that back-fills a call left unfinished by a cancelled chat, so history
 * never holds a tool call without its result (providers refuse a history with one).
 */
export function cancelledToolResult(callId: string, toolName: string): Message {
  return toolResultMessage(cancelledOutcome(callId, toolName));
}

/** The tool-result message for an outcome, linked to its call by id. */
export function toolResultMessage(outcome: ToolCallOutcome): Message {
  return { role: "tool", toolCallId: outcome.callId, toolName: outcome.toolName, content: outcome.result };
}

/**
 * Cuts `text` to `limit` characters and says so, so the model knows it is not seeing everything:
 * `…\n…[truncated: 12,345 characters, showing the first 8,000]`.
 */
export function truncateToolResult(text: string, limit = TOOL_RESULT_LIMIT): string {
  if (text.length <= limit) return text;
  // Never half of a surrogate pair at the end.
  const shown = sliceCodePoints(text, limit);
  return `${shown}\n…[truncated: ${groupDigits(text.length)} characters, showing the first ${groupDigits(shown.length)}]`;
}

/**
 * An error message fit for the model and for events: the message only (no stack trace), secrets
 * redacted, host file paths reduced to their base names, on one line, capped at about `limit`
 * characters.
 */
export function sanitizeErrorMessage(
  error: unknown,
  limit = TOOL_ERROR_MESSAGE_LIMIT,
  redactor: SecretRedactor = NO_SECRETS,
): string {
  const lines = toWellFormed(redactor.redact(rawMessage(error)))
    .split(/\r?\n/)
    .filter((line) => !STACK_FRAME.test(line))
    .map((line) => line.trim())
    .filter((line) => line !== "");
  const text = lines
    .join(" ")
    .replace(WINDOWS_PATH, "$1")
    .replace(POSIX_PATH, "$1")
    .replace(/\s+/g, " ")
    .trim();
  const message = text === "" ? toErrorInfo(error).name || "Error" : text;
  return truncateText(message, Math.max(1, limit));
}

const STACK_FRAME = /^\s*at\s.+/;
/**
 * An absolute POSIX path or file URL with at least one directory, keeping the base name. The
 * look-behind skips URLs (`https://host/a/b`) and ratios (`and/or`).
 */
const POSIX_PATH = /(?<![\w:/.~-])(?:file:\/\/)?(?:\/[^\s/'"`()<>:,;]+)+\/([^\s/'"`()<>:,;]+)/g;
const WINDOWS_PATH = /(?<![\w])[A-Za-z]:\\(?:[^\\\s'"`()<>,;]+\\)+([^\\\s'"`()<>,;]+)/g;

function failedOutcome(call: ToolCall, error: unknown, redactor: SecretRedactor): ToolCallOutcome {
  const message = sanitizeErrorMessage(error, TOOL_ERROR_MESSAGE_LIMIT, redactor);
  return {
    callId: call.id,
    toolName: call.name,
    ok: false,
    cancelled: false,
    // A typed failure of asking another agent tells the model which kind it was.
    result: JSON.stringify(
      error instanceof AgentCallError ? { error: message, code: error.code } : { error: message },
    ),
    error: { ...toErrorInfo(error), message },
    ...(error instanceof ToolError && error.failsChat ? { failsChat: true as const } : {}),
  };
}

type Settled = { ok: true; value: string } | { ok: false; error: unknown };

/** The invocation's outcome, or "aborted" the moment `signal` aborts; one promise, no chain. */
function untilAborted(invocation: Promise<string>, signal: AbortSignal): Promise<Settled | "aborted"> {
  return new Promise((resolve) => {
    const onAbort = () => resolve("aborted");
    signal.addEventListener("abort", onAbort, { once: true });
    invocation.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve({ ok: true, value: typeof value === "string" ? value : String(value) });
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        resolve({ ok: false, error });
      },
    );
  });
}

function rawMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

function groupDigits(value: number): string {
  return String(value).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}
