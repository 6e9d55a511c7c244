import { EMPTY_REPLY_PLACEHOLDER } from "../../machines/chat.machine.js";
import { type Message, type ToolCall, textOf } from "../llm/types.js";
import type { ChatProgress, InFlightIteration } from "./chat-journal.js";

/** The result a call gets when its tool was running as the host stopped and may not be re-run. */
export const INTERRUPTED_TOOL_RESULT = JSON.stringify({
  error: "interrupted",
  detail: "the host stopped while this tool ran; it may or may not have taken effect",
});

/** How an unfinished chat goes on (see {@link planResume}). */
export type ResumePlan =
  /**
   * Nothing to go on with: the chat had finished (`result`: its answer, as the chat returned it),
   * or the history moved on without it.
   */
  | { kind: "none"; result?: string }
  /** Not even the user message was journaled: the chat runs again from its text. */
  | { kind: "restart"; chatId: string; userText: string }
  | {
      kind: "continue";
      chatId: string;
      chatStart: number;
      /** The iteration the chat had finished (its next one asks the model). */
      iteration: number;
      /** The stored history, then the chat's messages it does not hold yet. */
      conversation: Message[];
      /** How many of `conversation` the stored history holds. */
      persisted: number;
      /** The tool calls in flight, to settle before the model is asked again. */
      inFlight: InFlightPlan | null;
    };

/** What becomes of each call of the iteration in flight. */
export interface InFlightPlan {
  iteration: InFlightIteration;
  /** Calls to run (again): an idempotent tool's, or one whose start was never journaled. */
  run: ToolCall[];
  /** Calls that were running, of tools not declared idempotent: they get the interrupted result. */
  inDoubt: ToolCall[];
}

/**
 * Compares the journaled progress with the stored history: the history must hold the messages
 * before the chat, then a prefix of the chat's own messages (the user message is stored first;
 * the rest at the end, in one write). Anything else means the chat finished or the session moved
 * on (`/new`, a compaction): nothing is resumed.
 */
export function planResume(
  history: readonly Message[],
  progress: ChatProgress,
  isIdempotent: (call: ToolCall) => boolean,
): ResumePlan {
  const stored = history.length - progress.chatStart;
  if (stored < 0 || stored > progress.messages.length) return { kind: "none" };
  const storedOfChat = history.slice(progress.chatStart);
  if (!storedOfChat.every((message, index) => sameMessage(message, progress.messages[index]!))) {
    return { kind: "none" };
  }
  if (progress.messages.length === 0) {
    return { kind: "restart", chatId: progress.chatId, userText: progress.userText };
  }
  const last = progress.messages[progress.messages.length - 1]!;
  // The answer is journaled and stored: the chat ended, only its journal entry was left.
  if (stored === progress.messages.length && progress.inFlight === null && last.role === "assistant") {
    const text = textOf(last.content);
    return { kind: "none", result: text.trim() === "" ? EMPTY_REPLY_PLACEHOLDER : text };
  }
  let inFlight: InFlightPlan | null = null;
  if (progress.inFlight !== null) {
    const iteration = progress.inFlight;
    const open = (iteration.assistant.toolCalls ?? []).filter((call) => !iteration.results[call.id]);
    const isInDoubt = (call: ToolCall) => iteration.started.includes(call.id) && !isIdempotent(call);
    inFlight = {
      iteration,
      run: open.filter((call) => !isInDoubt(call)),
      inDoubt: open.filter(isInDoubt),
    };
  }
  return {
    kind: "continue",
    chatId: progress.chatId,
    chatStart: progress.chatStart,
    iteration: progress.iteration,
    conversation: [...history, ...progress.messages.slice(stored)],
    persisted: history.length,
    inFlight,
  };
}

/** The tool message of a call in doubt. */
export function interruptedResult(call: ToolCall): Message {
  return { role: "tool", toolCallId: call.id, toolName: call.name, content: INTERRUPTED_TOOL_RESULT };
}

function sameMessage(a: Message, b: Message): boolean {
  return a.role === b.role && JSON.stringify(a.content) === JSON.stringify(b.content);
}
