import type { AgentEvent } from "./types.js";

/** The fields a session's event emitter stamps on every event, in the order it writes them. */
const STAMP_KEYS = ["agent", "session", "host", "chatId", "seq", "ts", "iteration"] as const;
/** Field names whose `,"name":` is kept: the event kinds' fields are a few dozen. */
const QUOTED_KEYS_KEPT = 128;

/**
 * A JSON writer for one publisher's events: returns exactly `JSON.stringify(event)`, but the stamp
 * that opens every event of a chat (agent, session, chat id) is encoded once per chat instead of
 * once per event, and only the kind's own fields go through `JSON.stringify` (the whole-object
 * call is the largest cost of publishing a text delta). An event that does not open with the
 * emitter's stamp, in its order and with its types, is handed to `JSON.stringify` as it is.
 */
export function createEventJsonWriter(): (event: AgentEvent) => string {
  let agent: string | undefined;
  let session: string | undefined;
  let host: string | undefined;
  let chatId: string | undefined;
  /** `{"agent":…,"session":…,"chatId":…,"seq":` for the last identity seen. */
  let head = "";
  let ts: string | undefined;
  /** `,"ts":"…","iteration":` for the last timestamp seen (it changes once a millisecond). */
  let middle = "";
  /** `,"name":` per field name seen. */
  const quotedKeys = new Map<string, string>();
  const quote = (key: string): string => {
    let quoted = quotedKeys.get(key);
    if (quoted === undefined) {
      quoted = `,${JSON.stringify(key)}:`;
      if (quotedKeys.size < QUOTED_KEYS_KEPT) quotedKeys.set(key, quoted);
    }
    return quoted;
  };
  return (event) => {
    if (!isStampedPlainEvent(event)) return JSON.stringify(event);
    const record = event as unknown as Record<string, unknown>;
    let stamped = 0;
    let body = "";
    for (const key in record) {
      if (stamped < STAMP_KEYS.length) {
        if (key !== STAMP_KEYS[stamped]) return JSON.stringify(event);
        stamped++;
        continue;
      }
      const value = JSON.stringify(record[key]);
      // JSON.stringify leaves out a field whose value has no JSON form (undefined, a function).
      if (value !== undefined) body += quote(key) + value;
    }
    if (stamped < STAMP_KEYS.length) return JSON.stringify(event);
    if (
      event.agent !== agent ||
      event.session !== session ||
      event.host !== host ||
      event.chatId !== chatId
    ) {
      agent = event.agent;
      session = event.session;
      host = event.host;
      chatId = event.chatId;
      // An undefined host has no JSON form: left out, as JSON.stringify does.
      const hostField = host === undefined ? "" : `"host":${JSON.stringify(host)},`;
      head = `{"agent":${JSON.stringify(agent)},"session":${JSON.stringify(session)},${hostField}"chatId":${JSON.stringify(chatId)},"seq":`;
    }
    if (event.ts !== ts) {
      ts = event.ts;
      middle = `,"ts":${JSON.stringify(ts)},"iteration":`;
    }
    // A finite number's JSON is its string form.
    return `${head}${event.seq}${middle}${event.iteration}${body}}`;
  };
}

/** A plain object whose stamp fields have the types the fast path writes without JSON.stringify. */
function isStampedPlainEvent(event: AgentEvent): boolean {
  return (
    Object.getPrototypeOf(event) === Object.prototype &&
    !("toJSON" in event) &&
    typeof event.agent === "string" &&
    typeof event.session === "string" &&
    (event.host === undefined || typeof event.host === "string") &&
    typeof event.chatId === "string" &&
    typeof event.ts === "string" &&
    Number.isFinite(event.seq) &&
    Number.isFinite(event.iteration)
  );
}
