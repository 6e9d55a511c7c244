/** What a secret is replaced with. */
export const REDACTED = "[redacted]";

/**
 * Secrets shorter than this are not redacted: a short password ("nats", "test") also occurs in
 * ordinary text, and hiding every occurrence of it would mangle events and tool results while
 * protecting little (a short secret is guessable anyway).
 */
export const MIN_SECRET_LENGTH = 8;

/**
 * Hides the process's configured secrets (API keys, the NATS password or token, the credentials
 * file's seed) in text that leaves the process: tool results (which reach the model, the history
 * and the events), event fields, error messages. Built once where the configuration is read and
 * passed down, never read from the environment deep inside.
 */
export interface SecretRedactor {
  /** False when there is nothing to hide: callers may skip the work. */
  readonly isActive: boolean;
  /** `text` with every secret replaced by {@link REDACTED}; the same string when none occurs. */
  redact(text: string): string;
  /**
   * `value` with every string inside it (in plain objects and arrays, at any depth) redacted;
   * the same value when no string held a secret, otherwise a copy of the parts that changed.
   */
  redactValue<T>(value: T): T;
  /**
   * How many characters at the end of `text` could be the start of a secret that the next piece of
   * a stream completes (0 when none could). A stream redacts what it has, holds these back and
   * sends the rest: see {@link createStreamRedactor}.
   */
  openTailLength(text: string): number;
}

/** The redactor with no secrets: it costs nothing. */
export const NO_SECRETS: SecretRedactor = {
  isActive: false,
  redact: (text) => text,
  redactValue: (value) => value,
  openTailLength: () => 0,
};

/**
 * A redactor for `secrets` (undefined and blank entries are skipped, and so are secrets shorter
 * than {@link MIN_SECRET_LENGTH}). Checking a string costs one `includes` per secret, so with a
 * handful of secrets it stays cheap enough for every event.
 */
export function createSecretRedactor(secrets: Iterable<string | undefined>): SecretRedactor {
  const unique = new Set<string>();
  for (const secret of secrets) {
    const trimmed = secret?.trim();
    if (trimmed !== undefined && trimmed.length >= MIN_SECRET_LENGTH) unique.add(trimmed);
  }
  if (unique.size === 0) return NO_SECRETS;
  // Longest first, so a secret that contains another is replaced whole.
  const needles = [...unique].sort((a, b) => b.length - a.length);
  const redact = (text: string): string => {
    let result = text;
    for (const needle of needles) {
      if (result.includes(needle)) result = result.replaceAll(needle, REDACTED);
    }
    return result;
  };
  const redactValue = <T>(value: T): T => redactDeep(value, redact) as T;
  const openTailLength = (text: string): number => {
    let longest = 0;
    for (const needle of needles) {
      for (let length = Math.min(needle.length - 1, text.length); length > longest; length--) {
        const start = text.length - length;
        if (text.charCodeAt(start) === needle.charCodeAt(0) && needle.startsWith(text.slice(start))) {
          longest = length;
          break;
        }
      }
    }
    return longest;
  };
  return { isActive: true, redact, redactValue, openTailLength };
}

/** Redacts a text that arrives in pieces, so a secret split between two pieces is still caught. */
export interface StreamRedactor {
  /** The piece's text that can be sent now, redacted; what could start a secret is held back. */
  push(piece: string): string;
  /** What is held back (the stream ended, or reset). */
  flush(): string;
}

/**
 * A {@link StreamRedactor}: each piece is redacted together with the tail held back from the one
 * before, and the end that could still begin a secret is held back again. With no secrets it
 * passes pieces through as they are.
 */
export function createStreamRedactor(redactor: SecretRedactor): StreamRedactor {
  if (!redactor.isActive) return { push: (piece) => piece, flush: () => "" };
  let held = "";
  return {
    push(piece) {
      const text = redactor.redact(held + piece);
      const open = redactor.openTailLength(text);
      held = text.slice(text.length - open);
      return text.slice(0, text.length - open);
    },
    flush() {
      const rest = held;
      held = "";
      return rest;
    },
  };
}

function redactDeep(value: unknown, redact: (text: string) => string): unknown {
  if (typeof value === "string") return redact(value);
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    value.forEach((item, index) => {
      const redacted = redactDeep(item, redact);
      if (redacted !== item) {
        copy ??= [...value];
        copy[index] = redacted;
      }
    });
    return copy ?? value;
  }
  if (!isPlainObject(value)) return value;
  let copy: Record<string, unknown> | undefined;
  for (const key in value) {
    const item = value[key];
    const redacted = redactDeep(item, redact);
    if (redacted !== item) {
      copy ??= { ...value };
      copy[key] = redacted;
    }
  }
  return copy ?? value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}
