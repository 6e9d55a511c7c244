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
}

/** The redactor with no secrets: it costs nothing. */
export const NO_SECRETS: SecretRedactor = {
  isActive: false,
  redact: (text) => text,
  redactValue: (value) => value,
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
  return { isActive: true, redact, redactValue };
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
