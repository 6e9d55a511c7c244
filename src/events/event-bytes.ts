import type { EventStamp } from "./event-emitter.js";
import type { AgentEvent, EventBody } from "./types.js";

/** The fields a session's event emitter stamps on every event, in the order it writes them. */
const STAMP_KEYS = ["agent", "session", "host", "chatId", "seq", "ts", "iteration"] as const;
const STAMP_KEY_SET: ReadonlySet<string> = new Set(STAMP_KEYS);
/** What opens each stamp field: `{"agent":`, then `,"session":` and so on. */
const STAMP_BYTES = {
  agent: Buffer.from('{"agent":', "utf8"),
  session: Buffer.from(',"session":', "utf8"),
  host: Buffer.from(',"host":', "utf8"),
  chatId: Buffer.from(',"chatId":', "utf8"),
  seq: Buffer.from(',"seq":', "utf8"),
  ts: Buffer.from(',"ts":', "utf8"),
  iteration: Buffer.from(',"iteration":', "utf8"),
} as const;
/** Field names whose `,"name":` bytes are kept: the event kinds' fields are a few dozen. */
const QUOTED_KEYS_KEPT = 128;
/** The buffer events are written into, one after the other; a new one when it is full. */
const SLAB_BYTES = 64 * 1024;
/**
 * Strings up to this length are copied code unit by code unit when they are printable ASCII
 * without a quote or a backslash (a text delta, a kind, an id); longer or other ones go through
 * `JSON.stringify` and the native UTF-8 encoder.
 */
const SHORT_STRING = 128;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const CLOSE_BRACE = 0x7d;
/** Integers up to this are written digit by digit (seqs and iterations are). */
const MAX_DIGITS_WRITTEN = 2 ** 31 - 1;

/**
 * Writes events as the UTF-8 bytes of exactly `JSON.stringify(event)`, for a bus that takes bytes
 * ({@link Bus.publishBytes}). On the hot path (one call per text delta), so nothing is built per
 * event: each field name is encoded once; short plain strings (the stamp's names, ids and
 * timestamp, a text delta) are copied into the buffer without `JSON.stringify`; and each event's
 * bytes are a view into one buffer that the events share (never written again once handed out, so
 * a client may hold a view until it sends it). An event this writer cannot vouch for (fields out of
 * the emitter's order or with odd types, a `toJSON`, a class instance) is written from
 * `JSON.stringify` as it is.
 */
export interface EventBytesWriter {
  /** The bytes of `JSON.stringify({...stamp, ...body})`, the event an emitter would have built. */
  stamped(stamp: Readonly<EventStamp>, body: EventBody): Uint8Array;
  /** The bytes of `JSON.stringify(event)`. */
  event(event: AgentEvent): Uint8Array;
}

export function createEventBytesWriter(): EventBytesWriter {
  // Allocated by the first event (a publisher that never publishes costs nothing), and not from
  // Node's shared pool: its own memory, so a view is `new Uint8Array(memory, offset, length)`.
  let slab = Buffer.alloc(0);
  let memory = slab.buffer;
  /** Where the event being written starts in `slab`. */
  let start = 0;
  /** Where the next byte goes. */
  let pos = 0;
  /** `,"name":` per field name seen; names that need the whole event stringified never enter. */
  const quotedKeys = new Map<string, Uint8Array>();

  /** Makes room for `bytes` more: a new buffer, with the event written so far moved into it. */
  const ensure = (bytes: number): void => {
    if (pos + bytes <= slab.length) return;
    const written = pos - start;
    const next = Buffer.allocUnsafeSlow(Math.max(SLAB_BYTES, (written + bytes) * 2));
    slab.copy(next, 0, start, pos);
    slab = next;
    memory = next.buffer;
    start = 0;
    pos = written;
  };
  const copy = (bytes: Uint8Array): void => {
    ensure(bytes.length);
    slab.set(bytes, pos);
    pos += bytes.length;
  };
  /** `text` known to be ASCII (a number's or a literal's JSON form). */
  const writeAscii = (text: string): void => {
    const length = text.length;
    ensure(length);
    for (let index = 0; index < length; index++) slab[pos + index] = text.charCodeAt(index);
    pos += length;
  };
  /** A number's JSON form; a small non-negative integer (a seq, an iteration) without a string. */
  const writeNumber = (value: number): void => {
    if (!(value >= 0 && value <= MAX_DIGITS_WRITTEN && Number.isInteger(value))) {
      // A finite number's JSON is its string form (-0 included: "0"); NaN and the infinities are null.
      writeAscii(Number.isFinite(value) ? String(value) : "null");
      return;
    }
    let digits = 1;
    for (let rest = value; rest >= 10; rest = Math.floor(rest / 10)) digits++;
    ensure(digits);
    let rest = value;
    for (let at = pos + digits - 1; at >= pos; at--) {
      slab[at] = 0x30 + (rest % 10);
      rest = Math.floor(rest / 10);
    }
    pos += digits;
  };
  const writeUtf8 = (text: string): void => {
    ensure(text.length * 3);
    pos += slab.write(text, pos, "utf8");
  };
  /** A string's JSON form: a short plain one copied as it is, any other through JSON.stringify. */
  const writeString = (text: string): void => {
    const length = text.length;
    if (length <= SHORT_STRING) {
      ensure(length + 2);
      let at = pos;
      slab[at++] = QUOTE;
      let index = 0;
      for (; index < length; index++) {
        const code = text.charCodeAt(index);
        // Control characters, non-ASCII (surrogates included), `"` and `\` are left to JSON.stringify.
        if (code < 0x20 || code > 0x7e || code === QUOTE || code === BACKSLASH) break;
        slab[at++] = code;
      }
      if (index === length) {
        slab[at++] = QUOTE;
        pos = at;
        return;
      }
    }
    writeUtf8(JSON.stringify(text));
  };
  const quotedKey = (key: string): Uint8Array | undefined => {
    let quoted = quotedKeys.get(key);
    if (quoted !== undefined) return quoted;
    if (!isPlainBodyKey(key)) return undefined;
    quoted = Buffer.from(`,${JSON.stringify(key)}:`, "utf8");
    if (quotedKeys.size < QUOTED_KEYS_KEPT) quotedKeys.set(key, quoted);
    return quoted;
  };
  /**
   * Writes `,"key":value` as JSON.stringify writes that member (nothing for a value with no JSON
   * form); false when the event must be stringified whole instead.
   */
  const writeMember = (key: string, value: unknown): boolean => {
    const quoted = quotedKey(key);
    if (quoted === undefined) return false;
    switch (typeof value) {
      case "string":
        copy(quoted);
        writeString(value);
        return true;
      case "number":
        copy(quoted);
        writeNumber(value);
        return true;
      case "boolean":
        copy(quoted);
        writeAscii(value ? "true" : "false");
        return true;
      case "undefined":
      case "function":
      case "symbol":
        // No JSON form: JSON.stringify leaves the member out.
        return true;
      case "object": {
        if (value === null) {
          copy(quoted);
          writeAscii("null");
          return true;
        }
        // toJSON is called with the member's name, which a value stringified alone does not get.
        if (typeof (value as { toJSON?: unknown }).toJSON === "function") return false;
        copy(quoted);
        writeUtf8(JSON.stringify(value));
        return true;
      }
      default:
        // A bigint: JSON.stringify of the whole event throws, as it should.
        return false;
    }
  };
  /**
   * Writes `{"agent":…,"iteration":N`; false when the stamp's types need JSON.stringify. Field by
   * field into the buffer, nothing built: a host's chats interleave their events, so an encoding
   * of the stamp kept for the next event would be another chat's for most events.
   */
  const writeStamp = (stamp: Readonly<EventStamp>): boolean => {
    const { agent, session, host, chatId, seq, ts, iteration } = stamp;
    if (
      typeof agent !== "string" ||
      typeof session !== "string" ||
      (host !== undefined && typeof host !== "string") ||
      typeof chatId !== "string" ||
      typeof ts !== "string" ||
      !Number.isFinite(seq) ||
      !Number.isFinite(iteration)
    ) {
      return false;
    }
    copy(STAMP_BYTES.agent);
    writeString(agent);
    copy(STAMP_BYTES.session);
    writeString(session);
    // An undefined host has no JSON form: left out, as JSON.stringify does.
    if (host !== undefined) {
      copy(STAMP_BYTES.host);
      writeString(host);
    }
    copy(STAMP_BYTES.chatId);
    writeString(chatId);
    copy(STAMP_BYTES.seq);
    writeNumber(seq);
    copy(STAMP_BYTES.ts);
    writeString(ts);
    copy(STAMP_BYTES.iteration);
    writeNumber(iteration);
    return true;
  };
  /** The event written so far, as its own view; the next event starts after it. */
  const finish = (): Uint8Array => {
    ensure(1);
    slab[pos++] = CLOSE_BRACE;
    const bytes = new Uint8Array(memory, start, pos - start);
    // A buffer grown for one large event is not kept for the small ones after it.
    start = pos = slab.length > SLAB_BYTES ? slab.length : pos;
    return bytes;
  };
  /** Starts the event over from `JSON.stringify(value)`. */
  const writeWhole = (value: unknown): Uint8Array => {
    pos = start;
    const json = JSON.stringify(value) as string | undefined;
    if (json === undefined) throw new TypeError("the event has no JSON form");
    writeUtf8(json);
    const bytes = new Uint8Array(memory, start, pos - start);
    start = pos = slab.length > SLAB_BYTES ? slab.length : pos;
    return bytes;
  };

  return {
    stamped(stamp, body) {
      // Whatever an event that threw half-way left behind is written over.
      pos = start;
      if (Object.getPrototypeOf(body) !== Object.prototype || !writeStamp(stamp)) {
        return writeWhole({ ...stamp, ...body });
      }
      const record = body as unknown as Record<string, unknown>;
      for (const key in record) {
        if (!writeMember(key, record[key])) return writeWhole({ ...stamp, ...body });
      }
      return finish();
    },
    event(event) {
      pos = start;
      if (!isStampedPlainEvent(event) || !writeStamp(event as EventStamp)) return writeWhole(event);
      const record = event as unknown as Record<string, unknown>;
      let stamped = 0;
      for (const key in record) {
        if (stamped < STAMP_KEYS.length) {
          if (key !== STAMP_KEYS[stamped]) return writeWhole(event);
          stamped++;
        } else if (!writeMember(key, record[key])) {
          return writeWhole(event);
        }
      }
      if (stamped < STAMP_KEYS.length) return writeWhole(event);
      return finish();
    },
  };
}

/**
 * A body field this writer may write after the stamp: not a stamp field (the event would carry it
 * in the stamp's place), not an array index (the event would carry it first), not `toJSON`.
 */
function isPlainBodyKey(key: string): boolean {
  const first = key.charCodeAt(0);
  return !(first >= 0x30 && first <= 0x39) && key !== "toJSON" && !STAMP_KEY_SET.has(key);
}

/** A plain object with no `toJSON` (JSON.stringify would call it). */
function isStampedPlainEvent(event: AgentEvent): boolean {
  return Object.getPrototypeOf(event) === Object.prototype && !("toJSON" in event);
}
