/**
 * A mistake in the user's configuration (an unknown provider, a missing API key, a bad flag).
 * Deliberately not an {@link import("./errors.js").LlmError}: nothing was sent, nothing should be
 * retried, and the CLI prints its one-line message instead of a stack trace.
 */
export class ConfigurationError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
  }
}
