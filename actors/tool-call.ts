import { fromPromise } from "xstate";
import type { ToolCallSettlement } from "../machines/iteration.machine.js";
import { requireDeps, type SessionDeps } from "../src/agent/session-deps.js";
import { errorInfo } from "../src/errors/error-info.js";
import type { Message, ToolCall } from "../src/llm/types.js";
import { wellFormedMessage } from "../src/llm/well-formed-message.js";
import { ToolError } from "../src/tools/tool-errors.js";
import { runToolCall, toolResultMessage } from "../src/tools/tool-runner.js";
import type { ToolContext } from "../src/tools/tool-set.js";

export interface ToolCallInput {
  call: ToolCall;
  iteration: number;
  /** The session's tools, concurrency cap and event emitter (passed down by the iteration). */
  deps?: SessionDeps;
}

/**
 * One tool call as a child actor. Queued behind the session's concurrency cap;
 * the actor's signal (aborted when the chat is cancelled) goes into the tool. Never rejects: a
 * failing tool is an `{"error": …}` result the model sees.
 */
export const toolCallActor = fromPromise<ToolCallSettlement, ToolCallInput>(({ input, signal }) => {
  const deps = requireDeps(input.deps, "iteration");
  const { toolSets, events, redactor } = deps;
  return deps.limitToolCall(async () => {
    const { call, iteration } = input;
    const appended: Message[] = [];
    if (deps.noteToolStart !== undefined && !signal.aborted) await deps.noteToolStart(call);
    const isStarted = !signal.aborted;
    if (isStarted) {
      events.emit(iteration, {
        kind: "ToolCallStarted",
        toolName: call.name,
        toolCallId: call.id,
        arguments: call.arguments,
      });
    }
    const startedAt = deps.now();
    // A fresh object per call (see SessionDeps.toolContext): completed here rather than copied
    // into another one with spreads (one object fewer, no empty temporaries per call).
    const context = deps.toolContext() as ToolContext;
    const { post, delegateApproval } = context;
    context.signal = signal;
    context.toolCallId = call.id;
    // Its span was opened by ToolCallStarted: a chat it asks joins the trace under it.
    const traceparent = deps.traceparentOf?.(call.id);
    if (traceparent !== undefined) context.traceparent = traceparent;
    // At the root of a tree, a call held further down is asked here too, naming who holds it.
    if (delegateApproval !== undefined) {
      context.delegateApproval = (held, pending) => {
        delegateApproval(held, pending);
        if (signal.aborted) return;
        const { toolCallId, toolName, holder } = held;
        events.emit(
          iteration,
          pending
            ? {
                kind: "ToolApprovalRequested",
                toolName,
                toolCallId,
                arguments: held.arguments,
                heldBy: holder,
              }
            : {
                kind: "ToolApprovalResolved",
                toolName,
                toolCallId,
                approved: held.approved ?? false,
                heldBy: holder,
              },
        );
      };
    }
    context.progress = (step) => {
      if (!signal.aborted) {
        events.emit(iteration, {
          kind: "ToolCallProgress",
          toolName: call.name,
          toolCallId: call.id,
          ...step,
        });
      }
    };
    // Whatever a tool posts (a background task's result) reaches the model and the history too.
    if (post !== undefined) context.post = (text, options) => post(redactor.redact(text), options);
    if (redactor.isActive) context.redact = (text: string) => redactor.redact(text);
    // Tool output enters the conversation: no secrets, no lone surrogates (as for results).
    context.appendMessage = (message) => appended.push(wellFormedMessage(redactor.redactValue(message)));
    const outcome = await runToolCall(call, toolSets, context, { redactor });
    const durationMs = deps.now() - startedAt;
    // A call that started and was cancelled is closed too: whoever saw it start sees it end.
    if (outcome.cancelled && isStarted) {
      events.emit(iteration, {
        kind: "ToolCallFailed",
        toolName: call.name,
        toolCallId: call.id,
        error: outcome.error ?? errorInfo("cancelled", "cancelled", { name: ToolError.name }),
        result: outcome.result,
        durationMs,
      });
    }
    if (!outcome.cancelled) {
      if (outcome.ok) {
        events.emit(iteration, {
          kind: "ToolCallCompleted",
          toolName: call.name,
          toolCallId: call.id,
          result: outcome.result,
          durationMs,
        });
      } else {
        events.emit(iteration, {
          kind: "ToolCallFailed",
          toolName: call.name,
          toolCallId: call.id,
          error: outcome.error ?? errorInfo("tool", outcome.result, { name: ToolError.name }),
          result: outcome.result,
          durationMs,
        });
      }
    }
    return {
      callId: call.id,
      toolName: call.name,
      ok: outcome.ok,
      message: toolResultMessage(outcome),
      appended,
      ...(outcome.failsChat && outcome.error !== undefined ? { fatal: outcome.error } : {}),
    };
  });
});
