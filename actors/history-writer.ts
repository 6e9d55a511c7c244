import { fromPromise } from "xstate";
import type { ContextHistory } from "../src/context/context-history.js";
import type { Message } from "../src/llm/types.js";

/** Appends a chat's messages to the history (a no-op for an in-memory agent). */
export function createAppendHistoryActor(history: ContextHistory | undefined) {
  return fromPromise<void, { messages: Message[] }>(async ({ input }) => {
    if (history && input.messages.length > 0) await history.append(input.messages);
  });
}

/** Replaces the history (after a compaction: the one summary message). */
export function createReplaceHistoryActor(history: ContextHistory | undefined) {
  return fromPromise<void, { messages: Message[] }>(async ({ input }) => {
    if (history) await history.replace(input.messages);
  });
}
