import { EventType } from "@ag-ui/core";
import { describe, expect, it } from "vitest";
import { parseInterruptId } from "../../../src/doors/agui/agui-ids.js";
import { AguiRunMapper } from "../../../src/doors/agui/agui-run-mapper.js";
import { ThreadHistory } from "../../../src/doors/agui/thread-history.js";
import type { AgentEvent, EventBody } from "../../../src/events/types.js";

/** The run mapper and the history rebuild, pure: agentloop events in, AG-UI events out. */

let seq = 0;
function event(iteration: number, body: EventBody, chatId = "c1"): AgentEvent {
  seq += 1;
  return {
    agent: "a",
    session: "s",
    chatId,
    seq,
    ts: new Date(0).toISOString(),
    iteration,
    ...body,
  } as AgentEvent;
}

function mapAll(mapper: AguiRunMapper, events: AgentEvent[]) {
  return events.flatMap((item, index) => mapper.map(item, index + 1));
}

const newMapper = () => new AguiRunMapper({ threadId: "s", runId: "r", chatId: "c1" });

describe("AguiRunMapper", () => {
  it("turns a stream reset into a visible correction, and the next attempt into a new message", () => {
    const out = mapAll(newMapper(), [
      event(1, { kind: "ModelRequest", final: false, messageCount: 1 }),
      event(1, { kind: "ModelStreamSegmentStart", attempt: 1 }),
      event(1, { kind: "ModelTextDelta", delta: "Hel" }),
      event(1, {
        kind: "ModelStreamSegmentReset",
        attempt: 1,
        reason: "network",
        error: { code: "network", message: "socket hang up", retryable: true },
      }),
      event(1, { kind: "ModelStreamSegmentStart", attempt: 2 }),
      event(1, { kind: "ModelTextDelta", delta: "Hello" }),
      event(1, {
        kind: "ModelResponse",
        content: "Hello",
        toolCalls: 0,
        usage: { prompt: 1, completion: 1, total: 2, cached: 0 },
      }),
      event(0, {
        kind: "ChatCompleted",
        result: "Hello",
        usage: { prompt: 1, completion: 1, total: 2, cached: 0 },
        tokenUsed: 2,
      }),
    ]);
    expect(out).toEqual([
      { type: EventType.STEP_STARTED, stepName: "iteration 1" },
      { type: EventType.TEXT_MESSAGE_START, messageId: "c1-1", role: "assistant" },
      { type: EventType.TEXT_MESSAGE_CONTENT, messageId: "c1-1", delta: "Hel" },
      {
        type: EventType.TEXT_MESSAGE_CONTENT,
        messageId: "c1-1",
        delta: "\n\n[stream interrupted: network; the answer starts again]",
      },
      { type: EventType.TEXT_MESSAGE_END, messageId: "c1-1" },
      {
        type: EventType.CUSTOM,
        name: "agentloop.stream_reset",
        value: { iteration: 1, attempt: 1, reason: "network", messageId: "c1-1" },
      },
      { type: EventType.TEXT_MESSAGE_START, messageId: "c1-1-2", role: "assistant" },
      { type: EventType.TEXT_MESSAGE_CONTENT, messageId: "c1-1-2", delta: "Hello" },
      { type: EventType.TEXT_MESSAGE_END, messageId: "c1-1-2" },
      { type: EventType.STEP_FINISHED, stepName: "iteration 1" },
      {
        type: EventType.RUN_FINISHED,
        threadId: "s",
        runId: "r",
        result: "Hello",
        outcome: { type: "success" },
        usage: [{ inputTokens: 1, outputTokens: 1, totalTokens: 2, cachedInputTokens: 0 }],
      },
    ]);
    // The history keeps the answer of the last attempt, under the id it streamed with.
    const history = new ThreadHistory();
    history.add(event(0, { kind: "ChatStarted", text: "hi" }, "c2"));
    history.add(event(1, { kind: "ModelStreamSegmentStart", attempt: 2 }, "c2"));
    history.add(
      event(
        1,
        {
          kind: "ModelResponse",
          content: "Hello",
          toolCalls: 0,
          usage: { prompt: 1, completion: 1, total: 2, cached: 0 },
        },
        "c2",
      ),
    );
    expect(history.messages()).toEqual([
      { id: "c2-user", role: "user", content: "hi" },
      { id: "c2-1-2", role: "assistant", content: "Hello" },
    ]);
    // `new` resets the session: the thread's conversation starts over.
    history.add(event(0, { kind: "StateChanged", machine: "session", state: "resetting" }, ""));
    history.add(event(0, { kind: "ChatStarted", text: "again" }, "c3"));
    expect(history.messages()).toEqual([{ id: "c3-user", role: "user", content: "again" }]);
    expect(history.state()).toEqual({ statechart: { session: "resetting" } });
  });

  it("ends the run on an approval with one interrupt that names the held event, closing what is open", () => {
    const mapper = newMapper();
    const out = mapAll(mapper, [
      event(1, { kind: "ModelRequest", final: false, messageCount: 1 }),
      event(1, { kind: "ToolApprovalRequested", toolName: "deploy", toolCallId: "t1", arguments: '{"x":1}' }),
      event(1, { kind: "ToolApprovalRequested", toolName: "deploy", toolCallId: "t2", arguments: "{}" }),
    ]);
    expect(mapper.isDone).toBe(true);
    const last = out.at(-1) as {
      type: string;
      outcome: { type: string; interrupts: Array<{ id: string; toolCallId: string }> };
    };
    expect(last.type).toBe(EventType.RUN_FINISHED);
    expect(last.outcome.interrupts.map((interrupt) => interrupt.toolCallId)).toEqual(["t1"]);
    expect(parseInterruptId(last.outcome.interrupts[0]!.id)).toEqual({ seq: 2, toolCallId: "t1" });
    expect(out.map((item) => item.type)).toEqual([
      EventType.STEP_STARTED,
      EventType.TOOL_CALL_START,
      EventType.TOOL_CALL_ARGS,
      EventType.TOOL_CALL_END,
      EventType.STEP_FINISHED,
      EventType.RUN_FINISHED,
    ]);
  });

  it("a cancelled chat finishes as cancelled, a failed one is RUN_ERROR, other chats are not the run's", () => {
    const cancelled = mapAll(newMapper(), [
      event(0, { kind: "ChatStarted", text: "x" }, "other"),
      event(0, {
        kind: "ChatFailed",
        error: { code: "cancelled", message: "stopped", retryable: false },
        cancelled: true,
      }),
    ]);
    expect(cancelled).toEqual([
      { type: EventType.RUN_FINISHED, threadId: "s", runId: "r", outcome: { type: "cancelled" } },
    ]);
    const failed = mapAll(newMapper(), [
      event(0, {
        kind: "ChatFailed",
        error: { code: "server_error", message: "the model failed", retryable: false },
        cancelled: false,
      }),
    ]);
    expect(failed).toEqual([
      { type: EventType.RUN_ERROR, code: "server_error", message: "the model failed" },
    ]);
  });
});
