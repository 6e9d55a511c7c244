/**
 * Width of a line of text in a proportional sans-serif font, estimated from per-character
 * widths: the drawing is laid out on the server, where there is no font engine to ask. The
 * estimate errs wide so that labels never overflow their boxes.
 */

// Widths in em for a Helvetica/Arial-like face, grouped by shape.
const NARROW = new Set("il.,:;|!'`[]()ftjIr ");
const WIDE = new Set("mwMW@%");
const UPPER_EM = 0.7;
const NARROW_EM = 0.32;
const WIDE_EM = 0.9;
const DEFAULT_EM = 0.58;

/** Estimated width in px of `text` at `fontSize` px; `bold` adds the usual ~6%. */
export function textWidth(text: string, fontSize: number, bold = false): number {
  let em = 0;
  for (const char of text) {
    if (NARROW.has(char)) em += NARROW_EM;
    else if (WIDE.has(char)) em += WIDE_EM;
    else if (char >= "A" && char <= "Z") em += UPPER_EM;
    else em += DEFAULT_EM;
  }
  return Math.ceil(em * fontSize * (bold ? 1.06 : 1));
}

/**
 * Font size of state names, px. Large on purpose: the UI scales the whole drawing down to fit its
 * pane, and state names must stay readable (≥ 10 px on screen) at the default window size.
 */
export const TITLE_FONT = 16;
/** Font size of transition labels, invokes and other small text, px. */
export const SMALL_FONT = 12;
/** Distance between two lines of small text, px. */
export const SMALL_LINE = 15;
