import { fromPromise } from "xstate";
import { requireDeps, type SessionDeps } from "../src/agent/session-deps.js";
import type { Message } from "../src/llm/types.js";

export interface HistoryWriteInput {
  messages: Message[];
  /** The session's history (passed down from the machine's context). */
  deps?: SessionDeps;
}

/** Appends a chat's messages to the session's history (a no-op for an in-memory agent). */
export const appendHistoryActor = fromPromise<void, HistoryWriteInput>(async ({ input }) => {
  const { history } = requireDeps(input.deps, "chat");
  if (history && input.messages.length > 0) await history.append(input.messages);
});

/** Replaces the session's history (after a compaction: the one summary message). */
export const replaceHistoryActor = fromPromise<void, HistoryWriteInput>(async ({ input }) => {
  const { history } = requireDeps(input.deps, "compaction");
  if (history) await history.replace(input.messages);
});
