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

/**
 * Another writer changed the session's history since this one last read or wrote it (JetStream:
 * the expected last subject sequence did not match). Nothing was written: the session must be
 * restored (or given up, when this host no longer owns it) before it writes again.
 */
export class HistoryConflictError extends HistoryError {
  readonly agent: string;
  readonly session: string;
  /** The sequence this writer expected to be the subject's last one. */
  readonly expectedSeq: number;

  constructor(where: { agent: string; session: string; expectedSeq: number }, cause?: unknown) {
    super(
      `history conflict (agent "${where.agent}", session "${where.session}"): another writer changed it after sequence ${where.expectedSeq}; nothing was written`,
      { cause },
    );
    this.agent = where.agent;
    this.session = where.session;
    this.expectedSeq = where.expectedSeq;
  }
}
