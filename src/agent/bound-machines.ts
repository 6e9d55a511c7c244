import { assign } from "xstate";
import { compactionRequestActor } from "../../actors/compaction-request.js";
import { appendHistoryActor, replaceHistoryActor } from "../../actors/history-writer.js";
import { modelStreamActor } from "../../actors/model-stream.js";
import { toolCallActor } from "../../actors/tool-call.js";
import { chatMachine } from "../../machines/chat.machine.js";
import { compactionMachine } from "../../machines/compaction.machine.js";
import { iterationMachine } from "../../machines/iteration.machine.js";
import type { Message } from "../llm/types.js";
import { requireDeps, type SessionDeps } from "./session-deps.js";

function recordAll(deps: SessionDeps, messages: readonly Message[]): void {
  for (const message of messages) deps.recordMessage(message);
}

/**
 * The machines bound to their actors and actions once per process (a `.provide()` copies a
 * machine's whole definition: per session it would cost every idle session those copies). What
 * differs between sessions travels as data: each root machine takes its session's
 * {@link SessionDeps} as `input.deps`, keeps it in its context and passes it on in the input of the
 * actors it invokes; the actions read it from the context. A machine started without deps fails at
 * its first step with an error that says so.
 */
export const boundMachines = (() => {
  const compaction = compactionMachine.provide({
    actions: { report: ({ context }, body) => requireDeps(context.deps, "compaction").events.emit(0, body) },
    actors: { requestSummary: compactionRequestActor, replaceHistory: replaceHistoryActor },
  });
  const iteration = iterationMachine.provide({
    actions: {
      recordMessages: ({ context }, { messages }) =>
        recordAll(requireDeps(context.deps, "iteration"), messages),
      selectApprovals: assign({
        awaitingApproval: ({ context }) => {
          const deps = requireDeps(context.deps, "iteration");
          return context.toolCalls.filter((call) => deps.needsApproval(call)).map((call) => call.id);
        },
      }),
      announceApprovals: ({ context }, { requests }) =>
        requireDeps(context.deps, "iteration").announceApprovals(context.iteration, requests),
      noteDecision: ({ context }, decision) =>
        requireDeps(context.deps, "iteration").events.emit(context.iteration, {
          kind: "ToolApprovalResolved",
          ...decision,
        }),
    },
    guards: {
      needsApproval: ({ context }) => {
        const deps = requireDeps(context.deps, "iteration");
        return context.toolCalls.some((call) => deps.needsApproval(call));
      },
    },
    actors: { streamModel: modelStreamActor, runToolCall: toolCallActor },
  });
  const chat = chatMachine.provide({
    actions: {
      report: ({ context }, { iteration, body }) =>
        requireDeps(context.deps, "chat").events.emit(iteration, body),
      recordMessages: ({ context }, { messages }) => recordAll(requireDeps(context.deps, "chat"), messages),
    },
    actors: { runIteration: iteration, compactContext: compaction, appendHistory: appendHistoryActor },
  });
  return { chat, iteration, compaction };
})();
