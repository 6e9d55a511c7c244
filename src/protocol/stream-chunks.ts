import { z } from "zod";

/**
 * The chunks of a streamed prompt reply (§6) and the error statuses (§9) of the Agent Protocol,
 * as a host writes them. One JSON chunk per NATS message; the stream ends with an
 * empty message without headers (the terminator).
 */

export const StreamChunk = z.discriminatedUnion("type", [
  z.looseObject({ type: z.literal("status"), data: z.string() }),
  z.looseObject({
    type: z.literal("response"),
    data: z.union([z.string(), z.looseObject({ text: z.string() })]),
  }),
  z.looseObject({
    type: z.literal("query"),
    data: z.looseObject({ id: z.string(), reply_subject: z.string(), prompt: z.string() }),
  }),
]);
export type StreamChunk = z.infer<typeof StreamChunk>;

/** `{"type":"status","data":"ack"}`: the mandatory first chunk, repeated as a keep-alive. */
export const ACK_CHUNK = JSON.stringify({ type: "status", data: "ack" });

/** `{"type":"response","data":text}`. */
export function responseChunk(text: string): string {
  return JSON.stringify({ type: "response", data: text });
}

/** The §9 status codes this host sends. */
export type ProtocolErrorStatus = 400 | 403 | 404 | 409 | 429 | 500 | 503;

/**
 * Our contract's error codes as §9 status codes: the caller's mistake 400, not allowed 403, nothing there 404, a
 * full mailbox or host, or a spent token budget, 429, a chat ended by `stop` / `new` / a superseding message / shutdown, or a question that would come back to a session already waiting on it (`cycle`), 409
 * (the session's state changed under it), a store that did not answer in time 503 (retryable), a model or host failure 500.
 */
export function errorStatusOf(code: string): ProtocolErrorStatus {
  switch (code) {
    case "bad_request":
      return 400;
    case "forbidden":
      return 403;
    case "unknown_agent":
    case "unknown_session":
      return 404;
    case "queue_overflow":
    case "overloaded":
    case "budget_exceeded":
      return 429;
    case "cancelled":
    case "cycle":
      return 409;
    case "unavailable":
      return 503;
    default:
      return 500;
  }
}

/** `max_payload` endpoint metadata (§4): bytes in base-1024 units, e.g. `1MB`. */
export function formatPayloadSize(bytes: number): string {
  const units = ["B", "KB", "MB", "GB"] as const;
  let value = bytes;
  let unit = 0;
  while (unit < units.length - 1 && value >= 1024 && value % 1024 === 0) {
    value /= 1024;
    unit++;
  }
  return `${value}${units[unit]}`;
}
