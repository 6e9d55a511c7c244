import { AgentloopError } from "../errors/agentloop-error.js";

/**
 * The bus's part of the error hierarchy. Both implementations reject with these (NatsBus maps the client's
 * errors onto them), so callers handle "nobody is listening" and "nobody answered in time" the
 * same way on either transport.
 */

/** Base of every bus error; `cause` keeps the transport's error. */
export class BusError extends AgentloopError {
  readonly code:
    | "bus"
    | "bus_timeout"
    | "no_responders"
    | "bus_closed"
    | "invalid_subject"
    | "bus_config"
    | "host_silent" = "bus";
  readonly retryable: boolean = false;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? {} : { cause: options.cause });
  }
}

/** A request got no reply within its timeout. */
export class BusTimeoutError extends BusError {
  override readonly code = "bus_timeout";
  readonly subject: string;
  readonly timeoutMs: number;

  constructor(subject: string, timeoutMs: number, options?: { cause?: unknown }) {
    super(`request to ${subject} timed out after ${timeoutMs} ms`, options);
    this.subject = subject;
    this.timeoutMs = timeoutMs;
  }
}

/** A request was sent to a subject nobody subscribes to (nothing would ever answer). */
export class NoRespondersError extends BusError {
  override readonly code = "no_responders";
  readonly subject: string;

  constructor(subject: string, options?: { cause?: unknown }) {
    super(`no responders for ${subject}: is the agent host running?`, options);
    this.subject = subject;
  }
}

/** The bus was closed (or is closing) before or while the operation ran. */
export class BusClosedError extends BusError {
  override readonly code = "bus_closed";
  constructor(message = "the bus is closed", options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A subject or subscription pattern that NATS would not accept (empty token, whitespace, `>` not last). */
export class InvalidSubjectError extends BusError {
  override readonly code = "invalid_subject";
  readonly subject: string;

  constructor(subject: string) {
    super(`invalid subject: ${JSON.stringify(subject)}`);
    this.subject = subject;
  }
}

/**
 * The user's configuration is wrong (a malformed NATS URL, an unreadable credentials file, bad
 * credentials): a different class from transport failures so the CLI can say what to fix.
 */
export class BusConfigError extends BusError {
  override readonly code = "bus_config";
}
