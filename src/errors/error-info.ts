import { AgentloopError } from "./agentloop-error.js";
import { type AgentloopErrorCode, isAgentloopErrorCode } from "./error-code.js";

/**
 * An error as data: how a failure travels through machines, actor outputs, events and replies.
 * Plain and JSON-safe (a persisted snapshot or a NATS payload keeps every field), so a machine
 * decides on `code` and `retryable`, never on a class or its name.
 */
export interface ErrorInfo {
  code: AgentloopErrorCode;
  message: string;
  retryable: boolean;
  /** A provider's HTTP status, when it answered with one. */
  status?: number;
  /** The class the error was thrown as (for people and traces; never to decide on). */
  name?: string;
}

/**
 * The one way an error becomes {@link ErrorInfo}: anything from outside the hierarchy is `internal`.
 *
 * @example
 * ```ts
 * import { toErrorInfo } from "agentloop/errors";
 *
 * toErrorInfo(new Error("boom")); // { code: "internal", message: "boom", retryable: false, name: "Error" }
 * toErrorInfo("a thrown string"); // { code: "internal", message: "a thrown string", retryable: false, name: "Error" }
 * ```
 */
export function toErrorInfo(error: unknown): ErrorInfo {
  if (error instanceof AgentloopError) {
    return errorInfo(error.code, error.message, {
      retryable: error.retryable,
      name: error.name,
      ...(error.status === undefined ? {} : { status: error.status }),
    });
  }
  if (isErrorInfo(error)) return error;
  if (error instanceof Error) return errorInfo("internal", error.message, { name: error.name });
  return errorInfo("internal", String(error), { name: "Error" });
}

/**
 * Builds an {@link ErrorInfo} (not retryable unless said), e.g. for a failure a machine names itself.
 *
 * @param details `retryable` (false unless given), and `status` and `name` (left out unless given).
 *
 * @example
 * ```ts
 * import { errorInfo } from "agentloop/errors";
 *
 * errorInfo("rate_limit", "slow down", { retryable: true, status: 429 });
 * // { code: "rate_limit", message: "slow down", retryable: true, status: 429 }
 * ```
 */
export function errorInfo(
  code: AgentloopErrorCode,
  message: string,
  details: { retryable?: boolean; status?: number; name?: string } = {},
): ErrorInfo {
  return {
    code,
    message,
    retryable: details.retryable ?? false,
    ...(details.status === undefined ? {} : { status: details.status }),
    ...(details.name === undefined ? {} : { name: details.name }),
  };
}

/**
 * True for a value that already is {@link ErrorInfo} (e.g. a machine's output handed on).
 *
 * @example
 * ```ts
 * import { isErrorInfo } from "agentloop/errors";
 *
 * isErrorInfo({ code: "timeout", message: "no answer", retryable: true }); // true
 * isErrorInfo(new Error("no answer")); // false: an Error is not data, use toErrorInfo
 * ```
 */
export function isErrorInfo(value: unknown): value is ErrorInfo {
  if (typeof value !== "object" || value === null || value instanceof Error) return false;
  const candidate = value as Partial<Record<keyof ErrorInfo, unknown>>;
  return (
    isAgentloopErrorCode(candidate.code) &&
    typeof candidate.message === "string" &&
    typeof candidate.retryable === "boolean"
  );
}
