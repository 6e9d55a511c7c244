import type { AgentEvent } from "./types.js";

/** Fields that identify an event: never shortened. */
const IDENTITY_FIELDS: ReadonlySet<string> = new Set(["kind", "agent", "session", "chatId", "ts"]);

/** The visible end of a shortened string: how much was cut, and why. */
export function truncationMarker(cutCharacters: number, maxBytes: number): string {
  return `…[truncated: ${cutCharacters} more characters did not fit the bus's ${maxBytes}-byte message limit]`;
}

/**
 * The JSON of `event` cut down to at most `maxBytes` of UTF-8, for a transport that refuses larger
 * messages (NATS `max_payload`): its longest strings (a result, a delta, tool arguments…) are
 * shortened, each ending with {@link truncationMarker}, and `truncated: true` is added (an additive
 * field: the event stays valid for every reader). The event itself is not changed.
 *
 * @returns the JSON, or undefined when it cannot fit even with every string cut.
 */
export function fitEventToPayload(event: AgentEvent, maxBytes: number): string | undefined {
  const copy = { ...(JSON.parse(JSON.stringify(event)) as Record<string, unknown>), truncated: true };
  let total = encodedBytes(copy);
  for (const leaf of stringLeaves(copy)) {
    if (total <= maxBytes) break;
    const original = (leaf.holder as Record<string | number, unknown>)[leaf.key] as string;
    const originalBytes = encodedBytes(original);
    // What this string may take once shortened: the rest of the event stays as it is.
    const budget = maxBytes - (total - originalBytes);
    const shortened = shorten(original, originalBytes, budget, maxBytes);
    const shortenedBytes = encodedBytes(shortened);
    // A short string would only grow by its marker.
    if (shortenedBytes >= originalBytes) continue;
    (leaf.holder as Record<string | number, unknown>)[leaf.key] = shortened;
    total += shortenedBytes - originalBytes;
  }
  return total <= maxBytes ? JSON.stringify(copy) : undefined;
}

interface StringLeaf {
  holder: Record<string, unknown> | unknown[];
  key: string | number;
  length: number;
}

/** Every string in the event but its identity fields, longest first. */
function stringLeaves(event: Record<string, unknown>): StringLeaf[] {
  const leaves: StringLeaf[] = [];
  const visit = (holder: Record<string, unknown> | unknown[], key: string | number, value: unknown): void => {
    if (typeof value === "string") leaves.push({ holder, key, length: value.length });
    else if (Array.isArray(value)) {
      for (let index = 0; index < value.length; index++) visit(value, index, value[index]);
    } else if (typeof value === "object" && value !== null) {
      const record = value as Record<string, unknown>;
      for (const [childKey, child] of Object.entries(record)) visit(record, childKey, child);
    }
  };
  for (const [key, value] of Object.entries(event)) {
    if (!IDENTITY_FIELDS.has(key)) visit(event, key, value);
  }
  return leaves.sort((a, b) => b.length - a.length);
}

/**
 * `text` cut to fit `budget` bytes once JSON-encoded, marker included (the marker alone when even
 * that does not fit). Escapes make the encoded size uneven, so the cut is estimated and corrected.
 */
function shorten(text: string, textBytes: number, budget: number, maxBytes: number): string {
  let keep = Math.floor((text.length * Math.max(0, budget - 160)) / textBytes);
  for (;;) {
    keep = Math.max(0, Math.min(keep, text.length - 1));
    // Never split a surrogate pair.
    if (keep > 0 && isHighSurrogate(text.charCodeAt(keep - 1))) keep -= 1;
    const candidate = text.slice(0, keep) + truncationMarker(text.length - keep, maxBytes);
    const bytes = encodedBytes(candidate);
    if (bytes <= budget || keep === 0) return candidate;
    keep -= Math.max(1, Math.ceil(((bytes - budget) * keep) / bytes));
  }
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function encodedBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value), "utf8");
}
