/**
 * What the adapter must know about a Claude model, decided from its id by pattern (the API has
 * no capability endpoint to ask). Ids come as `claude-<family>-<major>[-<minor>][-<date>]`
 * (`claude-opus-4-6`, `claude-sonnet-5`, `claude-haiku-4-5-20251001`), the older
 * `claude-<major>[-<minor>]-<family>` (`claude-3-7-sonnet-latest`), with dotted versions or
 * provider prefixes and suffixes (`anthropic.claude-opus-4-6-v1`, `claude-opus-4-6@20260101`).
 * An unrecognised id (an older model, a non-Claude model behind an Anthropic-compatible server)
 * gets the behaviour every model has accepted.
 *
 * @see https://docs.anthropic.com/en/docs/build-with-claude/adaptive-thinking
 * @see https://docs.anthropic.com/en/docs/about-claude/models/overview
 */

/** A parsed Claude model id; `major` is undefined for an unversioned id (`claude-mythos-preview`). */
export interface ClaudeModel {
  family: string;
  major?: number;
  minor: number;
}

// A minor version is one or two digits; eight digits after the major are a date
// (`claude-opus-4-20250514` is Opus 4.0).
const FAMILY_FIRST = /claude-([a-z]+)-(\d+)(?:[-.](\d{1,2}))?(?!\d)/;
const VERSION_FIRST = /claude-(\d+)(?:[-.](\d{1,2}))?-([a-z]+)/;
const FAMILY_ONLY = /claude-([a-z]+)/;

/** Families that only ever shipped models of the adaptive generation (ids may carry no version). */
const ADAPTIVE_FAMILIES = new Set(["fable", "mythos"]);

export function parseClaudeModel(model: string): ClaudeModel | undefined {
  const id = model.toLowerCase();
  const familyFirst = FAMILY_FIRST.exec(id);
  if (familyFirst?.[1] !== undefined) {
    return { family: familyFirst[1], major: Number(familyFirst[2]), minor: Number(familyFirst[3] ?? 0) };
  }
  const versionFirst = VERSION_FIRST.exec(id);
  if (versionFirst?.[3] !== undefined) {
    return { family: versionFirst[3], major: Number(versionFirst[1]), minor: Number(versionFirst[2] ?? 0) };
  }
  const family = FAMILY_ONLY.exec(id)?.[1];
  return family === undefined ? undefined : { family, minor: 0 };
}

function isAtLeast(model: ClaudeModel | undefined, major: number, minor: number): boolean {
  if (model === undefined) return false;
  if (ADAPTIVE_FAMILIES.has(model.family)) return true;
  if (model.major === undefined) return false;
  return model.major > major || (model.major === major && model.minor >= minor);
}

/**
 * How a model is asked to think:
 * - `"budget"`: `thinking: {type: "enabled", budget_tokens}` (Claude 3.7 … 4.5, and unknown ids);
 * - `"adaptive"`: `thinking: {type: "adaptive"}` + `output_config: {effort}` (Claude 4.6 and
 *   later, Fable and Mythos). 4.6 deprecates the budget form; 4.7+, the Claude 5 family, Fable and
 *   Mythos reject it with a 400.
 */
export type ThinkingStyle = "budget" | "adaptive";

export function thinkingStyleFor(model: string): ThinkingStyle {
  return isAtLeast(parseClaudeModel(model), 4, 6) ? "adaptive" : "budget";
}

/**
 * Claude 4.7 and later (Opus 4.7/4.8, the Claude 5 family, Fable, Mythos) reject sampling
 * parameters such as `temperature` with a 400 on every request; 4.6 and older accept them while
 * thinking is off.
 */
export function rejectsTemperature(model: string): boolean {
  return isAtLeast(parseClaudeModel(model), 4, 7);
}
