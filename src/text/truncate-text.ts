/**
 * Cutting text without breaking it. Lengths are counted in UTF-16 code units (JavaScript's
 * `length`, what the caps in this project measure), but a cut never falls between the two halves
 * of a surrogate pair: half an emoji is a lone surrogate, which JSON carries as `\ud83d` and which
 * providers reject with a 400, so one bad cut would poison every later request of a session.
 */

/**
 * `text` cut to at most `maxLength` code units, with `marker` (counted in the length) appended
 * when it was cut: `truncateText(line, 500)` is at most 499 units of the line and `…`.
 */
export function truncateText(text: string, maxLength: number, marker = "…"): string {
  if (text.length <= maxLength) return text;
  return sliceCodePoints(text, maxLength - marker.length) + marker;
}

/**
 * The first `maxLength` code units of `text` (all of it when shorter), one fewer when the cut
 * would split a surrogate pair.
 */
export function sliceCodePoints(text: string, maxLength: number): string {
  if (text.length <= maxLength) return text;
  let end = Math.max(0, Math.floor(maxLength));
  if (end > 0 && isHighSurrogate(text.charCodeAt(end - 1)) && isLowSurrogate(text.charCodeAt(end))) {
    end -= 1;
  }
  return text.slice(0, end);
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
