import { AgentloopError } from "../errors/agentloop-error.js";

/** Errors of the persisted history. Both mean the data can't be trusted as it is: never retried. */

/** Base of history errors. */
export class HistoryError extends AgentloopError {
  readonly code: "history" | "corrupt_history" | "history_schema_version" = "history";
  readonly retryable = false;
}

/** A stored message is not valid JSON or not a valid message. Restoring stops rather than skip it. */
export class CorruptHistoryError extends HistoryError {
  override readonly code = "corrupt_history";
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
  override readonly code = "history_schema_version";
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
