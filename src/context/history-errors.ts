/** Errors of the persisted history. Both mean the data can't be trusted as it is: never retried. */

/** Base of history errors. `name` is the concrete class name. */
export class HistoryError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
  }
}

/** A stored message is not valid JSON or not a valid message. Restoring stops rather than skip it. */
export class CorruptHistoryError extends HistoryError {
  readonly agent: string;
  readonly session: string;
  readonly position: number;

  constructor(where: { agent: string; session: string; position: number }, reason: string, cause?: unknown) {
    super(
      `corrupt history row (agent "${where.agent}", session "${where.session}", position ${where.position}): ${reason}`,
      { cause },
    );
    this.agent = where.agent;
    this.session = where.session;
    this.position = where.position;
  }
}

/** The database was written by a newer agentloop with a schema this one does not know. */
export class HistorySchemaVersionError extends HistoryError {
  readonly found: number;
  readonly supported: number;

  constructor(found: number, supported: number, path: string) {
    super(
      `history database ${path} has schema version ${found}, newer than the supported ${supported}: upgrade agentloop`,
    );
    this.found = found;
    this.supported = supported;
  }
}
