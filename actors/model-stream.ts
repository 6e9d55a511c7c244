import { fromCallback } from "xstate";
import type { StreamEvent } from "../machines/iteration.machine.js";
import { requireDeps, type SessionDeps } from "../src/agent/session-deps.js";
import { toErrorInfo } from "../src/events/types.js";
import type { LlmOptions, Message, StreamSink } from "../src/llm/types.js";
import { wellFormedResponse } from "../src/llm/well-formed-message.js";
import { createStreamRedactor, type StreamRedactor } from "../src/text/secret-redactor.js";

export interface ModelStreamInput {
  messages: Message[];
  options: LlmOptions;
  iteration: number;
  isFinal: boolean;
  /** The session's model client and event emitter (passed down from the chat machine's context). */
  deps?: SessionDeps;
}

/** Without secrets to hide, every piece goes out as it came: one shared redactor, none per stream. */
const PASS_THROUGH: StreamRedactor = { push: (piece) => piece, flush: () => "" };

/**
 * The model-stream actor with the segment collector. Deltas go straight to the event
 * emitter, never through the machine (a machine event costs ~20 µs); the machine hears only about
 * resets and the end. Stopping the actor aborts the request.
 */
export const modelStreamActor = fromCallback<StreamEvent, ModelStreamInput>(({ input, sendBack }) => {
  const { llm: client, events, redactor } = requireDeps(input.deps, "iteration");
  events.emit(input.iteration, {
    kind: "ModelRequest",
    final: input.isFinal,
    messageCount: input.messages.length,
  });
  const controller = new AbortController();
  let isStopped = false;
  let isPending = true;
  let attempt = 1;
  let isSegmentOpen = false;
  const openSegment = () => {
    if (isSegmentOpen) return;
    isSegmentOpen = true;
    events.emit(input.iteration, { kind: "ModelStreamSegmentStart", attempt });
  };
  // Each delta is redacted on its own by the emitter; a secret split between two deltas is caught
  // here, where the end of one that could begin a secret waits for the next.
  const text = redactor.isActive ? createStreamRedactor(redactor) : PASS_THROUGH;
  const reasoning = redactor.isActive ? createStreamRedactor(redactor) : PASS_THROUGH;
  // A piece held back whole sends nothing now (without secrets every delta goes out as it came).
  const isSent = (delta: string) => delta !== "" || !redactor.isActive;
  const emitText = (delta: string) => {
    if (isSent(delta)) events.emit(input.iteration, { kind: "ModelTextDelta", delta });
  };
  const emitReasoning = (delta: string) => {
    if (isSent(delta)) events.emit(input.iteration, { kind: "ModelReasoningDelta", delta });
  };
  const flush = () => {
    if (!redactor.isActive) return;
    emitReasoning(reasoning.flush());
    emitText(text.flush());
  };
  const sink: StreamSink = {
    onTextDelta(delta) {
      if (isStopped) return;
      openSegment();
      emitText(text.push(delta));
    },
    onReasoningDelta(delta) {
      if (isStopped) return;
      openSegment();
      emitReasoning(reasoning.push(delta));
    },
    onReset(reason, cause) {
      if (isStopped) return;
      flush();
      events.emit(input.iteration, {
        kind: "ModelStreamSegmentReset",
        attempt,
        reason,
        error: toErrorInfo(cause),
      });
      attempt += 1;
      isSegmentOpen = false;
      sendBack({ type: "stream.reset", reason });
    },
    onCompleted() {},
  };
  client
    .generateStream({ messages: input.messages, options: input.options, signal: controller.signal }, sink)
    .then(
      (response) => {
        isPending = false;
        if (isStopped) return;
        // The response enters the conversation, replayed on every later request: a lone
        // surrogate from the model (a JSON `\ud83d`) must not poison it.
        const wellFormed = wellFormedResponse(response);
        flush();
        // Marks the request's end with its own usage (the chat's events only carry the sum).
        events.emit(input.iteration, {
          kind: "ModelResponse",
          content: wellFormed.content,
          toolCalls: wellFormed.toolCalls.length,
          usage: wellFormed.usage,
          purpose: "chat",
        });
        sendBack({ type: "stream.completed", response: wellFormed });
      },
      (error: unknown) => {
        isPending = false;
        if (isStopped) return;
        flush();
        sendBack({ type: "stream.failed", error: toErrorInfo(error) });
      },
    );
  return () => {
    isStopped = true;
    // Aborting builds a DOMException: only worth it while the request is still running.
    if (isPending) controller.abort();
  };
});
