import type { ToolCallSettlement } from "../../machines/iteration.machine.js";
import type { EventBody } from "../events/types.js";
import type { Message, ToolCall } from "../llm/types.js";
import type { AskedChat } from "./journal-entry.js";
import { interruptedResult, planResume } from "./resume-plan.js";
import { type SessionJournal, settledIteration } from "./session-journal.js";

/** What a resumed chat starts from (see {@link settleUnfinishedChat}). */
export interface ResumedChat {
  chatId: string;
  userText: string;
  /** Absent when the chat starts over from its text (its user message was never stored). */
  continueFrom?: {
    conversation: Message[];
    resumeFrom: { chatStart: number; persisted: number; iteration: number };
  };
}

export interface SettleUnfinishedChatParams {
  journal: SessionJournal;
  /** The stored history, as the session restored it. */
  history: readonly Message[];
  isIdempotent(call: ToolCall): boolean;
  /** Publishes an event under the resumed chat's id (set by the caller from the journal). */
  emit(iteration: number, body: EventBody): void;
  /** The onMessageRecorded stream (the journal is one of its listeners). */
  recordMessage(message: Message): void;
  /** Runs one call as the loop would (events, the concurrency cap, its start journaled). */
  runTool(call: ToolCall, iteration: number): Promise<ToolCallSettlement>;
  /**
   * Stops the chat a call in doubt had asked (`ask_agent`): its answer has nobody to go to. Default:
   * nothing is stopped.
   */
  stopAskedChat?(call: ToolCall, chat: AskedChat): void;
  /** The chat had finished before its host stopped (only its journal entry was left): its answer. */
  onFinished?(result: string): void;
}

/**
 * Resume after a crash: brings the session's unfinished chat back to a state the chat machine can go on from.
 * Publishes `ChatResumed`; settles the tool calls that were in flight — an idempotent tool's call,
 * or one that never started, runs (again); a call that was running, of any other tool, gets the
 * `interrupted` result and a `ToolCallInDoubt` event, and the model decides (a chat such a call
 * had asked of another agent is stopped: nobody waits for its answer). A model stream in
 * progress is simply asked again. Resolves with what to run, or undefined when nothing is left
 * (the chat had finished, or the session moved on): then the journal's chat is dropped.
 */
export async function settleUnfinishedChat(
  params: SettleUnfinishedChatParams,
): Promise<ResumedChat | undefined> {
  const { journal, emit } = params;
  const progress = journal.unfinishedChat;
  if (progress === null) return undefined;
  const plan = planResume(params.history, progress, params.isIdempotent);
  if (plan.kind === "none") {
    journal.endChat();
    if (plan.result !== undefined) params.onFinished?.(plan.result);
    return undefined;
  }
  if (plan.kind === "restart") {
    emit(0, { kind: "ChatResumed", step: "start", fromIteration: 0 });
    journal.endChat();
    return { chatId: plan.chatId, userText: plan.userText };
  }
  const inFlight = plan.inFlight;
  emit(0, {
    kind: "ChatResumed",
    step: inFlight === null ? "model" : "tools",
    fromIteration: inFlight === null ? plan.iteration + 1 : plan.iteration,
  });
  let conversation = plan.conversation;
  if (inFlight !== null) {
    for (const call of inFlight.inDoubt) {
      emit(plan.iteration, {
        kind: "ToolCallInDoubt",
        toolName: call.name,
        toolCallId: call.id,
        arguments: call.arguments,
      });
      params.recordMessage(interruptedResult(call));
      const asked = inFlight.iteration.asked?.[call.id];
      if (asked !== undefined) params.stopAskedChat?.(call, asked);
    }
    const settlements = await Promise.all(inFlight.run.map((call) => params.runTool(call, plan.iteration)));
    for (const settlement of settlements) params.recordMessage(settlement.message);
    for (const settlement of settlements)
      for (const message of settlement.appended) params.recordMessage(message);
    // The batch is whole again: it joins the chat's finished messages (stored with the next write).
    const settled = settledIteration(inFlight.iteration);
    conversation = [...conversation, ...settled];
    journal.continueChat({
      ...progress,
      messages: [...progress.messages, ...settled],
      inFlight: null,
    });
  }
  return {
    chatId: plan.chatId,
    userText: progress.userText,
    continueFrom: {
      conversation,
      resumeFrom: { chatStart: plan.chatStart, persisted: plan.persisted, iteration: plan.iteration },
    },
  };
}
