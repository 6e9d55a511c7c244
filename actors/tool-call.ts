import { fromPromise } from "xstate";
import type { ToolCallSettlement } from "../machines/iteration.machine.js";
import type { Message, ToolCall } from "../src/llm/types.js";
import { wellFormedMessage } from "../src/llm/well-formed-message.js";
import { runToolCall, toolResultMessage } from "../src/tools/tool-runner.js";
import { type SessionDeps, sessionDepsOf } from "./session-deps.js";

/**
 * One tool call as a child actor (SPEC §3.4, §6.2). Queued behind the session's concurrency cap;
 * the actor's signal (aborted when the chat is cancelled) goes into the tool. Never rejects: a
 * failing tool is an `{"error": …}` result the model sees.
 */
export function createToolCallActor(resolve: (system: object) => SessionDeps = sessionDepsOf) {
  return fromPromise<ToolCallSettlement, { call: ToolCall; iteration: number }>(
    ({ input, signal, system }) => {
      const { toolSets, limit, events, toolContext, now, redactor, noteToolStart } = resolve(system);
      return limit(async () => {
        const { call, iteration } = input;
        const appended: Message[] = [];
        if (noteToolStart !== undefined && !signal.aborted) await noteToolStart(call);
        if (!signal.aborted) {
          events.emit(iteration, {
            kind: "ToolCallStarted",
            toolName: call.name,
            toolCallId: call.id,
            arguments: call.arguments,
          });
        }
        const startedAt = now();
        const outcome = await runToolCall(
          call,
          toolSets,
          {
            ...toolContext(),
            signal,
            // Tool output enters the conversation: no secrets, no lone surrogates (as for results).
            appendMessage: (message) => appended.push(wellFormedMessage(redactor.redactValue(message))),
          },
          { redactor },
        );
        const durationMs = now() - startedAt;
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
              error: outcome.error ?? { name: "ToolError", message: outcome.result },
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
        };
      });
    },
  );
}
