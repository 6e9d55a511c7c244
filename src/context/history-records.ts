/**
 * How a session's history is laid out as JetStream messages (see {@link NatsContextHistory}).
 * Pure: no connection, so the split and reassembly are tested without a server.
 *
 * One write is one *record*: a kind and a body (UTF-8 JSON). A body bigger than the server's max
 * payload is cut into *parts*, consecutive messages on the same subject that carry the record's
 * batch id and `i/n` in headers. A reader keeps only complete records: a writer that died between
 * two parts leaves an incomplete record, which is skipped, so a record is all or nothing (like one
 * SQLite transaction).
 */

/** What a record means. */
export const RECORD_KINDS = ["append", "snapshot", "seq", "approval", "none"] as const;
export type RecordKind = (typeof RECORD_KINDS)[number];

/** Header names (exact case: the v3 client's header lookups are case-sensitive). */
export const RECORD_HEADER = "Agentloop-Record";
export const BATCH_HEADER = "Agentloop-Batch";
export const PART_HEADER = "Agentloop-Part";

/**
 * Room kept for a part's headers (ours and JetStream's expectation headers) and the protocol
 * line within the server's max payload.
 */
export const PART_HEADER_ALLOWANCE = 1_024;

/** One stored message of a record, as read back. */
export interface RecordPart {
  /** Stream sequence. */
  seq: number;
  kind: RecordKind;
  batch: string;
  /** 1-based. */
  part: number;
  parts: number;
  body: Uint8Array;
}

/** A complete record, its parts joined. */
export interface HistoryRecord {
  kind: RecordKind;
  body: Uint8Array;
  /** Stream sequence of its first part (a purge before it keeps the whole record). */
  firstSeq: number;
  lastSeq: number;
}

/** The bodies of a record's parts: `body` cut into pieces of at most `maxPartBytes` (one, when it fits or is empty). */
export function splitBody(body: Uint8Array, maxPartBytes: number): Uint8Array[] {
  if (!(maxPartBytes >= 1)) throw new RangeError(`maxPartBytes must be at least 1, got ${maxPartBytes}`);
  if (body.length <= maxPartBytes) return [body];
  const parts: Uint8Array[] = [];
  for (let start = 0; start < body.length; start += maxPartBytes) {
    parts.push(body.subarray(start, start + maxPartBytes));
  }
  return parts;
}

/** `i/n` of a part header, or undefined when it is not one. */
export function parsePartHeader(value: string | undefined): { part: number; parts: number } | undefined {
  const match = value === undefined ? null : /^(\d+)\/(\d+)$/.exec(value);
  if (match === null) return undefined;
  const part = Number(match[1]);
  const parts = Number(match[2]);
  if (!(part >= 1 && part <= parts)) return undefined;
  return { part, parts };
}

/** True when `value` is a {@link RecordKind}. */
export function isRecordKind(value: string | undefined): value is RecordKind {
  return (RECORD_KINDS as readonly (string | undefined)[]).includes(value);
}

/**
 * The complete records among `parts` (stream order), in order. A record's parts are written one
 * after the other, so an incomplete one (a part missing, or another record's first part coming
 * first) is dropped.
 */
export function assembleRecords(parts: readonly RecordPart[]): HistoryRecord[] {
  const records: HistoryRecord[] = [];
  let open: { first: RecordPart; bodies: Uint8Array[] } | undefined;
  for (const part of parts) {
    if (part.part === 1) open = { first: part, bodies: [] };
    else if (
      open === undefined ||
      open.first.batch !== part.batch ||
      open.first.parts !== part.parts ||
      open.bodies.length !== part.part - 1
    ) {
      open = undefined; // A stray part of a record whose start is gone.
      continue;
    }
    open.bodies.push(part.body);
    if (open.bodies.length === open.first.parts) {
      records.push({
        kind: open.first.kind,
        body: concat(open.bodies),
        firstSeq: open.first.seq,
        lastSeq: part.seq,
      });
      open = undefined;
    }
  }
  return records;
}

/** The records from the last snapshot on (all of them when there is none). */
export function fromLastSnapshot(records: readonly HistoryRecord[]): HistoryRecord[] {
  const last = records.findLastIndex((record) => record.kind === "snapshot");
  return last === -1 ? [...records] : records.slice(last);
}

function concat(bodies: readonly Uint8Array[]): Uint8Array {
  if (bodies.length === 1) return bodies[0]!;
  const joined = new Uint8Array(bodies.reduce((total, body) => total + body.length, 0));
  let offset = 0;
  for (const body of bodies) {
    joined.set(body, offset);
    offset += body.length;
  }
  return joined;
}
