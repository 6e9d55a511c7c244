import { HistoryError } from "../context/history-errors.js";

/**
 * Another writer stored a different record under the number this one wrote (the session moved to
 * another host behind this one's back). Nothing was written: the session's journal belongs to the
 * other writer now.
 */
export class JournalConflictError extends HistoryError {}
