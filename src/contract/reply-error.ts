import { z } from "zod";

/**
 * The error half of the NATS contract's failed reply: a fixed list of codes clients switch on.
 * A leaf module (it imports nothing of agentloop), so the error hierarchy, the bus and the events
 * can all name these codes without importing each other.
 */

/** Stable error codes of the contract: clients switch on these strings. */
export const ERROR_CODES = [
  "bad_request",
  "unknown_agent",
  "queue_overflow",
  "cancelled",
  "llm_error",
  "internal",
  "overloaded",
  /** The answer was over the bus's max payload: read it from the session history (`chatId`). */
  "reply_too_large",
  /** The tenant's token budget for the period is spent: the chat ran no model request. Not retryable within the period. */
  "budget_exceeded",
  /** The caller may not do this (e.g. approve a tool call its own prompt caused); someone else has to. Not retryable. */
  "forbidden",
  /**
   * Retryable, ask again shortly: no host could take the request now (its session's owner is
   * changing or unreachable), or a store the host depends on (JetStream) did not answer in time,
   * even retried.
   */
  "unavailable",
  /**
   * An agent asked another (`ask_agent`) whose session is already waiting higher up the same chain:
   * answering would wait on itself. Refused at once. Not retryable.
   */
  "cycle",
] as const;

/** The `code` of a failed reply. */
export const ErrorCode = z.enum(ERROR_CODES);
export type ErrorCode = z.infer<typeof ErrorCode>;

/** The error part of a failed reply. */
export const ReplyError = z.object({ code: ErrorCode, message: z.string() });
export type ReplyError = z.infer<typeof ReplyError>;
