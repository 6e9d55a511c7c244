import type { AnyActorRef } from "xstate";
import type { ChatEvent } from "../../machines/chat.machine.js";
import { type IterationContext, iterationInFlight } from "../../machines/iteration.machine.js";

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
