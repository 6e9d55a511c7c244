/**
 * The bus's error hierarchy. Both implementations reject with these (NatsBus maps the client's
 * errors onto them), so callers handle "nobody is listening" and "nobody answered in time" the
 * same way on either transport.
 */

/** Base of every bus error. `name` is the concrete class name; `cause` keeps the transport's error. */
export class BusError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
  }
}

/** A request got no reply within its timeout. */
export class BusTimeoutError extends BusError {
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
  readonly subject: string;

  constructor(subject: string, options?: { cause?: unknown }) {
    super(`no responders for ${subject}: is the agent host running?`, options);
    this.subject = subject;
  }
}

/** The bus was closed (or is closing) before or while the operation ran. */
export class BusClosedError extends BusError {
  constructor(message = "the bus is closed", options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** A subject or subscription pattern that NATS would not accept (empty token, whitespace, `>` not last). */
export class InvalidSubjectError extends BusError {
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
export class BusConfigError extends BusError {}
