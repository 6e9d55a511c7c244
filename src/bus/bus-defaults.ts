import type { BusMessage } from "./bus.js";

/**
 * Defaults both bus implementations share, so swapping NATS for the in-process bus changes no
 * behaviour a caller can see.
 */

/** Request timeout when the caller gives none. Chats wait on a model, so this is generous. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** Receives the error of a subscriber's handler that threw (the bus goes on delivering). */
export type HandlerErrorReporter = (error: unknown, message: BusMessage) => void;

/**
 * Default reporter: one line on stderr. A throwing handler must not break the bus, but it must not
 * vanish silently either.
 */
export const reportHandlerError: HandlerErrorReporter = (error, message) => {
  const text = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  console.error(`agentloop bus: a subscriber of ${message.subject} threw: ${text}`);
};
