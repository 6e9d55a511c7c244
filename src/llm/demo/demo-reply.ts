import type { LlmOptions, Message, ToolCall } from "../types.js";
import { canCallTools, textOf } from "../types.js";
import { derivePlan, shorten } from "./derive-plan.js";
import { summariseConversation } from "./summarise-conversation.js";

/** What the demo model answers to one request, before streaming. */
export interface DemoReply {
  reasoning: string;
  /** Empty when the reply is tool calls. */
  text: string;
  toolCalls: ToolCall[];
}

/** Every text answer starts with this, so nobody mistakes the demo for a real model. */
export const DEMO_LABEL = "[demo] ";

const TIME_WORDS = /\b(?:time|clock|date)\b/i;
const PLAN_WORDS = /\b(?:plan|todo|to-do|steps)\b/i;
const SUMMARY_WORDS = /\bsummar(?:y|ies|ise|ize|ising|izing)\b/i;
/** "what did I say first?", "what was my last message?", "do you remember what I asked?" */
const RECALL_WORDS =
  /\b(?:what did i (?:say|write|ask|tell you)|what (?:was|were) my (?:\w+ )?(?:message|question|words)|(?:do you )?remember what i)\b/i;
const FIRST_WORDS = /\b(?:first|start|beginning)\b/i;
const CONVERSATION_WORDS = /\b(?:conversation|chat|discussion|dialogue|history)\b/i;
/**
 * Blocks that ToolSets inject before the user's text (e.g. `<TODO_LIST_REMINDER>`): they are the
 * system talking, and the word "plan" in a reminder must not make the demo plan again.
 */
const INJECTED_BLOCK = /<([A-Z][A-Z0-9_]*)>[\s\S]*?<\/\1>/g;

/**
 * The demo model's answer to a conversation, a pure function of its messages and options,
 * so a run is repeatable offline: a summary for a compaction request; tool calls when the last user message mentions the
 * time or a plan and the matching built-in tool is offered; a report of the tool results once they
 * are back; otherwise a reply built from the prompt.
 */
export function createDemoReply(messages: readonly Message[], options: LlmOptions): DemoReply {
  const lastUserIndex = messages.findLastIndex((message) => message.role === "user");
  const lastUser = messages[lastUserIndex];
  const prompt = lastUser ? userWords(textOf(lastUser.content)) : "";
  const since = lastUserIndex < 0 ? [] : messages.slice(lastUserIndex + 1);

  if (SUMMARY_WORDS.test(prompt) && CONVERSATION_WORDS.test(prompt)) {
    const earlier = messages.slice(0, Math.max(lastUserIndex, 0));
    const count = earlier.filter((message) => message.role !== "system").length;
    return {
      reasoning: `The user asks for a summary of the conversation (${count} messages). I will list what was asked and done.`,
      text: summariseConversation(earlier),
      toolCalls: [],
    };
  }

  const toolResults = since.filter((message) => message.role === "tool");
  if (toolResults.length > 0) return reportToolResults(toolResults, messages);

  if (RECALL_WORDS.test(prompt))
    return recallEarlierMessage(prompt, messages.slice(0, Math.max(lastUserIndex, 0)));

  if (canCallTools(options)) {
    const offered = new Set((options.tools ?? []).map((tool) => tool.name));
    const calls = plannedToolCalls(prompt, offered, messages);
    if (calls.toolCalls.length > 0) return calls;
  }
  return plainAnswer(prompt, canCallTools(options));
}

function userWords(text: string): string {
  return text.replace(INJECTED_BLOCK, "").trim();
}

function plannedToolCalls(prompt: string, offered: Set<string>, messages: readonly Message[]): DemoReply {
  // Ids count the calls already in the conversation, so the same input always gives the same ids.
  let callCount = messages.reduce((count, message) => count + (message.toolCalls?.length ?? 0), 0);
  const nextId = () => `demo_call_${++callCount}`;
  const reasons: string[] = [];
  const toolCalls: ToolCall[] = [];
  if (TIME_WORDS.test(prompt) && offered.has("current_time")) {
    reasons.push("The user asks about the time, so I will call current_time.");
    toolCalls.push({ id: nextId(), name: "current_time", arguments: "{}" });
  }
  if (PLAN_WORDS.test(prompt) && offered.has("todo_list")) {
    reasons.push("The user wants a plan, so I will record one with todo_list.");
    toolCalls.push({ id: nextId(), name: "todo_list", arguments: JSON.stringify(derivePlan(prompt)) });
  }
  return { reasoning: reasons.join(" "), text: "", toolCalls };
}

function reportToolResults(results: readonly Message[], messages: readonly Message[]): DemoReply {
  const calls = new Map<string, ToolCall>();
  for (const message of messages) for (const call of message.toolCalls ?? []) calls.set(call.id, call);
  const names: string[] = [];
  const lines = results.map((result) => {
    const call = result.toolCallId === undefined ? undefined : calls.get(result.toolCallId);
    const name = result.toolName ?? call?.name ?? "a tool";
    names.push(name);
    return describeResult(name, textOf(result.content).trim(), call);
  });
  return {
    reasoning: `Tool results are back (${names.join(", ")}). I will report them.`,
    text: DEMO_LABEL + lines.join("\n"),
    toolCalls: [],
  };
}

function describeResult(name: string, result: string, call: ToolCall | undefined): string {
  const failure = errorMessageOf(result);
  if (failure !== undefined) return `The tool ${name} failed: ${shorten(failure, 200)}.`;
  if (name === "current_time") return `The current time is ${result}.`;
  if (name === "todo_list") {
    const steps = planStepsOf(call?.arguments);
    if (steps.length > 0)
      return ["I recorded this plan:", ...steps.map((step, i) => `${i + 1}. ${step}`)].join("\n");
    return "I recorded the plan.";
  }
  return `The tool ${name} returned: ${shorten(result, 200)}`;
}

/** The message of a `{"error": "…"}` tool result (how a failed tool call reaches the model), if that is what it is. */
function errorMessageOf(result: string): string | undefined {
  if (!result.startsWith("{")) return undefined;
  try {
    const parsed: unknown = JSON.parse(result);
    if (typeof parsed === "object" && parsed !== null && "error" in parsed) return String(parsed.error);
  } catch {
    // Not JSON: an ordinary result.
  }
  return undefined;
}

function planStepsOf(argumentsJson: string | undefined): string[] {
  if (argumentsJson === undefined) return [];
  try {
    const parsed: unknown = JSON.parse(argumentsJson);
    if (typeof parsed !== "object" || parsed === null || !("plan" in parsed) || !Array.isArray(parsed.plan)) {
      return [];
    }
    return parsed.plan
      .filter(
        (item): item is { step: unknown; status?: unknown } => typeof item === "object" && item !== null,
      )
      .map((item) => `${String(item.step)}${item.status ? ` (${String(item.status)})` : ""}`);
  } catch {
    return [];
  }
}

function plainAnswer(prompt: string, toolsOffered: boolean): DemoReply {
  const words = prompt.split(/\s+/).filter((word) => word.length > 0).length;
  const quoted = shorten(prompt.replace(/\s+/g, " "), 200);
  const opening =
    words === 0
      ? "You sent an empty message."
      : `You said: "${quoted}" (${words} ${words === 1 ? "word" : "words"}).`;
  const hint = toolsOffered ? " Ask me for the time or for a plan to see a tool call." : "";
  return {
    reasoning: `The user wrote ${words} words. No tool is needed, so I will answer directly.`,
    text: `${DEMO_LABEL}${opening} I am the offline demo model: no LLM provider is configured, so my answers are canned.${hint}`,
    toolCalls: [],
  };
}

/**
 * Shows that a session remembers: quotes the user's first message (when asked for the first),
 * else the one before this, from the conversation the model was sent (the history the session
 * restored, or the summary a compaction left).
 */
function recallEarlierMessage(prompt: string, earlier: readonly Message[]): DemoReply {
  const said = earlier
    .filter((message) => message.role === "user")
    .map((message) => userWords(textOf(message.content)))
    .filter((text) => text !== "");
  if (said.length === 0) {
    return {
      reasoning: "The user asks what they said before, and this session holds no earlier message.",
      text: `${DEMO_LABEL}This is the first message of this session: there is nothing earlier to quote.`,
      toolCalls: [],
    };
  }
  const isFirst = FIRST_WORDS.test(prompt);
  const index = isFirst ? 0 : said.length - 1;
  const which = isFirst ? "Your first message in this session was" : "Your previous message was";
  const quoted = shorten(said[index]!.replace(/\s+/g, " "), 300);
  return {
    reasoning: `The user asks what they said ${isFirst ? "first" : "last"}. The session holds ${said.length} earlier ${said.length === 1 ? "message" : "messages"} from them; I quote it.`,
    text: `${DEMO_LABEL}${which}: "${quoted}" (${index + 1} of the ${said.length} ${said.length === 1 ? "message" : "messages"} you sent before this one).`,
    toolCalls: [],
  };
}
