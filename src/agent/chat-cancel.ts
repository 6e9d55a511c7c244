import type { AnyActorRef } from "xstate";
import type { ChatEvent } from "../../machines/chat.machine.js";
import { type IterationContext, iterationInFlight } from "../../machines/iteration.machine.js";
import { CancelledError } from "../llm/errors.js";

/**
 * Why a chat was cut off when another host takes its session over (this host lost the session's
 * lease, or handed its shard on): the chat is not over, the next owner resumes it from its journal,
 * so the journal is left as it is for that host.
 */
export class ChatPassedOnError extends CancelledError {
  constructor(reason: string) {
    super(`${reason}; the host that serves the session now goes on with the chat`);
  }
}

/** True when a chat's signal was aborted because another host takes the session over. */
export function isPassedOn(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true && signal.reason instanceof ChatPassedOnError;
}

/**
 * The cancel event for a running chat actor, carrying what its running iteration has in flight
 * (the assistant message and the calls settled so far), read from the iteration's own context.
 * The chat back-fills it, so the history never holds a tool call without its result; the iteration
 * does not report its progress to the chat as it goes (two machine events per turn saved).
 */
export function chatCancelEvent(chat: AnyActorRef): ChatEvent {
  const children = (chat.getSnapshot() as { children?: Record<string, AnyActorRef | undefined> }).children;
  for (const child of Object.values(children ?? {})) {
    const snapshot = child?.getSnapshot() as
      | { machine?: { id?: string }; context?: IterationContext }
      | undefined;
    if (snapshot?.machine?.id === "iteration" && snapshot.context !== undefined) {
      return { type: "cancel", inFlight: iterationInFlight(snapshot.context) };
    }
  }
  return { type: "cancel" };
}
