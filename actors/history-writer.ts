import { fromPromise } from "xstate";
import type { Message } from "../src/llm/types.js";
import { type SessionDeps, sessionDepsOf } from "./session-deps.js";

/** Appends a chat's messages to the session's history (a no-op for an in-memory agent). */
export function createAppendHistoryActor(resolve: (system: object) => SessionDeps = sessionDepsOf) {
  return fromPromise<void, { messages: Message[] }>(async ({ input, system }) => {
    const { history } = resolve(system);
    if (history && input.messages.length > 0) await history.append(input.messages);
  });
}

/** Replaces the session's history (after a compaction: the one summary message). */
export function createReplaceHistoryActor(resolve: (system: object) => SessionDeps = sessionDepsOf) {
  return fromPromise<void, { messages: Message[] }>(async ({ input, system }) => {
    const { history } = resolve(system);
    if (history) await history.replace(input.messages);
  });
}
