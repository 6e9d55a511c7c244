import { truncateText } from "../text/truncate-text.js";
/**
 * Detection of tool calls a model wrote as text instead of calling the tool. Open-weight
 * models served behind OpenAI-compatible APIs do this when the server's tool parser misses their
 * format: the raw chat-template markup ends up in `content`. Only the start and the end of the text
 * are scanned: stray markup is the whole answer or trails a short preamble, and a long answer that
 * merely discusses a format in its middle must not be rejected.
 */

/** How many characters at each end of the text are scanned. */
export const STRAY_MARKUP_WINDOW = 512;

/** Longest excerpt returned, so an error message stays one readable line. */
const MAX_EXCERPT = 120;

/**
 * Special tokens of chat templates that only ever surround a tool call. `_` stands for either
 * `_` or DeepSeek's `▁`; the delimiters may be ASCII `|` or DeepSeek's full-width `｜`.
 * Tokens that also end ordinary turns (`<|end|>`, `<|im_end|>`, `<|eot_id|>`) are left out.
 */
const SPECIAL_TOKEN_NAMES = [
  // Granite, Phi-4-mini, LFM2
  "tool_call",
  "tool_calls",
  "tool_call_start",
  "tool_call_end",
  // DeepSeek V3 / R1 (full-width in the real template, ASCII in some quantised builds)
  "tool_calls_begin",
  "tool_calls_end",
  "tool_call_begin",
  "tool_sep",
  // Kimi K2
  "tool_calls_section_begin",
  "tool_calls_section_end",
  "tool_call_argument_begin",
  // Llama 3.1+ built-in tools
  "python_tag",
  "eom_id",
  // gpt-oss (harmony): a message header, a tool-call terminator, a constrained-format marker
  "start",
  "channel",
  "call",
  "constrain",
  // InternLM
  "action_start",
  "plugin",
];

const SPECIAL_TOKEN = new RegExp(
  `<[|｜](?:${SPECIAL_TOKEN_NAMES.map((name) => name.replaceAll("_", "[_▁]")).join("|")})[|｜]>`,
  "i",
);

/**
 * What every pattern here needs somewhere in the text (a `<`, `[`, `{`, `✿` or backtick, or a
 * `to=functions.` / `multi_tool_use.` address): a text with none of them, which most answers are,
 * is clean without running the patterns one by one. Keep it in step with the patterns.
 */
const MARKUP_HINT = /[<[{✿`]|to=functions\.|multi_tool_use\./;

/** Markup that needs no knowledge of the offered tools. */
const GENERIC_PATTERNS: RegExp[] = [
  SPECIAL_TOKEN,
  // Mistral, and LM Studio's tool-request wrapper
  /\[TOOL_CALLS\]|\[TOOL_REQUEST\]/,
  // Hermes / Qwen / GLM (`<tool_call>`), MiniMax / Seed (`<minimax:tool_call>`), Nemotron (`<TOOLCALL>`);
  // closing tags too, because a long call may leave only its end inside the last window
  /<\/?(?:[a-z]+:)?tool_?calls?>/i,
  // Claude-style XML calls
  /<\/?(?:antml:)?function_calls>|<(?:antml:)?invoke\s+name\s*=/,
  // Llama 3.1 custom-tool format and Qwen3-Coder: `<function=name>`
  /<function=[A-Za-z_][\w.-]*>/,
  // FunctionGemma
  /<start_function_call>/,
  // Qwen-Agent's legacy format
  /✿FUNCTION✿/,
  // Gemma / Gemini code-style calls
  /```tool_code\b/,
  // gpt-oss addressing a tool, and the parallel-call wrapper some OpenAI models leak
  /\bto=functions\.[A-Za-z_][\w-]*/,
  /\bmulti_tool_use\.parallel\b/,
];

const NAME_KEYS = "name|tool|tool_name|function|recipient_name";
const ARGUMENT_KEYS = "arguments|parameters|args|input|tool_input";
/** `"key": "string value", ` — a simple field that may come before the ones we look for. */
const SIMPLE_FIELD = String.raw`"[\w-]+"\s*:\s*"[^"\n]*"\s*,\s*`;

/** Patterns built from the offered tool names: a JSON object or call naming one of them. */
function toolNamePatterns(toolNames: readonly string[]): RegExp[] {
  const names = toolNames.filter((name) => name.length > 0).map(escapeRegExp);
  if (names.length === 0) return [];
  const known = `(?:functions\\.)?(?:${names.join("|")})`;
  return [
    // {"name": "current_time", "arguments": {}} and {"type": "function", "name": "x", "parameters": …}
    new RegExp(
      String.raw`\{\s*(?:${SIMPLE_FIELD})*"(?:${NAME_KEYS})"\s*:\s*"${known}"\s*,\s*(?:${SIMPLE_FIELD})*"(?:${ARGUMENT_KEYS})"\s*:`,
    ),
    // {"arguments": {}, "name": "current_time"}
    new RegExp(
      String.raw`\{\s*"(?:${ARGUMENT_KEYS})"\s*:\s*(?:\{[^{}]*\}|"[^"]*")\s*,\s*"(?:name|tool|tool_name)"\s*:\s*"${known}"`,
    ),
    // {"tool": "current_time"} — a key that only a call would use, so no arguments are needed
    new RegExp(String.raw`\{\s*"(?:tool|tool_name|recipient_name)"\s*:\s*"${known}"`),
    // "tool_calls": [ … naming an offered tool (an API example naming another tool is prose)
    new RegExp(String.raw`"tool_calls"\s*:\s*\[[\s\S]{0,200}?"${known}"`),
  ];
}

/** Llama 3.2 pythonic calls as the whole answer, `[current_time(), todo_list(plan=[…])]`: start only. */
function pythonicCallPattern(toolNames: readonly string[]): RegExp | undefined {
  const names = toolNames.filter((name) => name.length > 0).map(escapeRegExp);
  if (names.length === 0) return undefined;
  return new RegExp(String.raw`^\s*\[\s*(?:${names.join("|")})\s*\(`);
}

interface CompiledPatterns {
  patterns: RegExp[];
  pythonicCall: RegExp | undefined;
}

/** A session offers the same tools on every request: compile their patterns once. */
const compiledByToolNames = new Map<string, CompiledPatterns>();
const MAX_CACHED_TOOL_SETS = 256;

function patternsFor(toolNames: readonly string[]): CompiledPatterns {
  const key = toolNames.join("\u0000");
  let compiled = compiledByToolNames.get(key);
  if (!compiled) {
    if (compiledByToolNames.size >= MAX_CACHED_TOOL_SETS) compiledByToolNames.clear();
    compiled = {
      patterns: [...GENERIC_PATTERNS, ...toolNamePatterns(toolNames)],
      pythonicCall: pythonicCallPattern(toolNames),
    };
    compiledByToolNames.set(key, compiled);
  }
  return compiled;
}

/**
 * Looks for tool-call markup written as text in the first and last {@link STRAY_MARKUP_WINDOW}
 * characters of `text`. `toolNames` are the tools that were offered: JSON objects count only when
 * they name one of them, so prose or code that mentions a tool stays clean.
 *
 * @returns the markup found (an excerpt), or `undefined` when the text is clean.
 */
export function findStrayToolMarkup(text: string, toolNames: readonly string[]): string | undefined {
  if (!mayHoldToolMarkup(text)) return undefined;
  const windows =
    text.length <= 2 * STRAY_MARKUP_WINDOW
      ? [text]
      : [text.slice(0, STRAY_MARKUP_WINDOW), text.slice(-STRAY_MARKUP_WINDOW)];
  const { patterns, pythonicCall } = patternsFor(toolNames);
  const pythonic = pythonicCall?.exec(text);
  if (pythonic) return excerpt(pythonic[0]);
  for (const window of windows) {
    for (const pattern of patterns) {
      const match = pattern.exec(window);
      if (match) return excerpt(match[0]);
    }
  }
  return undefined;
}

/**
 * False when `text` holds none of what every markup pattern needs ({@link MARKUP_HINT}), so
 * {@link findStrayToolMarkup} would find nothing: one scan, without the offered tools' names.
 */
export function mayHoldToolMarkup(text: string): boolean {
  return MARKUP_HINT.test(text);
}

function excerpt(found: string): string {
  const oneLine = found.trim().replace(/\s+/g, " ");
  return truncateText(oneLine, MAX_EXCERPT);
}

function escapeRegExp(value: string): string {
  return value.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
