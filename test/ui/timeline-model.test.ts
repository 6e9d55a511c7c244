import { describe, expect, it } from "vitest";
import type { AgentEvent, EventBody } from "../../src/events/types.js";
import { formatDuration, layoutTimeline, timeTicks } from "../../src/ui/public/timeline-layout.js";
import { TimelineModel } from "../../src/ui/public/timeline-model.js";

/** The chat timeline's model and layout (src/ui/public/timeline-*.js): events → bands, bars, lanes. */

const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);
const usage1 = { prompt: 1000, completion: 50, total: 1050, cached: 200 };
const usage2 = { prompt: 1300, completion: 80, total: 1380, cached: 1000 };

/** Events of one chat at chosen times (ms after T0). */
function chatEvents(chatId = "chat-1") {
  let seq = 0;
  return (ms: number, body: EventBody, iteration = 0): AgentEvent =>
    ({
      agent: "bot",
      session: "s1",
      chatId,
      seq: ++seq,
      ts: new Date(T0 + ms).toISOString(),
      iteration,
      ...body,
    }) as AgentEvent;
}

function iterationState(at: ReturnType<typeof chatEvents>, ms: number, state: string, iteration: number) {
  return at(ms, { kind: "StateChanged", machine: "iteration", state }, iteration);
}

/** Two iterations: a reset in the first request, three tool calls (two at once, one failing). */
function scriptedChat(): AgentEvent[] {
  const at = chatEvents();
  return [
    at(0, { kind: "ChatStarted", text: "hi", tokenUsed: 500, tokenLimit: 4000, contextCompactRatio: 0.7 }),
    iterationState(at, 10, "streaming", 1),
    at(10, { kind: "ModelRequest", final: false, messageCount: 2 }, 1),
    at(300, { kind: "ModelStreamSegmentStart", attempt: 1 }, 1),
    at(300, { kind: "ModelTextDelta", delta: "Let me" }, 1),
    at(500, { kind: "ModelTextDelta", delta: " check" }, 1),
    at(
      600,
      {
        kind: "ModelStreamSegmentReset",
        attempt: 1,
        reason: "server_error",
        error: { code: "server_error", retryable: true, name: "ServerError", message: "529" },
      },
      1,
    ),
    at(1000, { kind: "ModelStreamSegmentStart", attempt: 2 }, 1),
    at(1000, { kind: "ModelReasoningDelta", delta: "hm" }, 1),
    at(1400, { kind: "ModelResponse", content: "", toolCalls: 3, usage: usage1, purpose: "chat" }, 1),
    iterationState(at, 1400, "assembling", 1),
    iterationState(at, 1400, "executingTools", 1),
    at(1500, { kind: "ToolCallStarted", toolName: "current_time", toolCallId: "c1", arguments: "{}" }, 1),
    at(1500, { kind: "ToolCallStarted", toolName: "ask_agent", toolCallId: "c2", arguments: "{}" }, 1),
    at(
      1600,
      {
        kind: "ToolCallCompleted",
        toolName: "current_time",
        toolCallId: "c1",
        result: "noon",
        durationMs: 95,
      },
      1,
    ),
    at(1700, { kind: "ToolCallStarted", toolName: "todo_list", toolCallId: "c3", arguments: "{}" }, 1),
    at(
      1900,
      {
        kind: "ToolCallFailed",
        toolName: "ask_agent",
        toolCallId: "c2",
        error: { code: "tool", retryable: false, name: "ToolError", message: "no helper" },
        result: '{"error":"no helper"}',
        durationMs: 398,
      },
      1,
    ),
    at(
      2000,
      { kind: "ToolCallCompleted", toolName: "todo_list", toolCallId: "c3", result: "[]", durationMs: 299 },
      1,
    ),
    iterationState(at, 2000, "toolsDone", 1),
    iterationState(at, 2100, "streaming", 2),
    at(2100, { kind: "ModelRequest", final: true, messageCount: 6 }, 2),
    at(2300, { kind: "ModelStreamSegmentStart", attempt: 1 }, 2),
    at(2300, { kind: "ModelTextDelta", delta: "Noon." }, 2),
    at(2800, { kind: "ModelResponse", content: "Noon.", toolCalls: 0, usage: usage2, purpose: "chat" }, 2),
    iterationState(at, 2800, "answered", 2),
    at(2900, { kind: "ContextCompaction", phase: "started" }),
    at(
      3500,
      {
        kind: "ModelResponse",
        content: "summary",
        toolCalls: 0,
        usage: { prompt: 1400, completion: 40, total: 1440, cached: 0 },
        purpose: "compaction",
      },
      0,
    ),
    at(3500, { kind: "ContextCompaction", phase: "completed", tokenUsed: 40 }),
    at(3600, {
      kind: "ChatCompleted",
      result: "Noon.",
      usage: { prompt: 3700, completion: 170, total: 3870, cached: 1200 },
      tokenUsed: 40,
      tokenLimit: 4000,
    }),
  ];
}

function build(events: readonly AgentEvent[]) {
  const model = new TimelineModel();
  for (const event of events) model.apply(event as never);
  return model;
}

describe("the timeline model", () => {
  it("builds iteration bands, request bars with their attempts, tool lanes, waits and token bars", () => {
    const chat = build(scriptedChat()).get("chat-1")!;
    expect(chat).toMatchObject({ text: "hi", status: "completed", startMs: T0, endMs: T0 + 3600 });
    expect(chat.iterations).toEqual([
      { iteration: 1, startMs: T0 + 10, endMs: T0 + 2000, isOpen: false, final: false },
      { iteration: 2, startMs: T0 + 2100, endMs: T0 + 2800, isOpen: false, final: true },
    ]);

    const layout = layoutTimeline(chat);
    expect(layout.spanMs).toBe(3600);
    expect(
      layout.requests.map(({ iteration, status, attempts, ttftMs, streamMs, durationMs }) => ({
        iteration,
        status,
        attempts,
        ttftMs,
        streamMs,
        durationMs,
      })),
    ).toEqual([
      { iteration: 1, status: "completed", attempts: 2, ttftMs: 290, streamMs: 400, durationMs: 1390 },
      { iteration: 2, status: "completed", attempts: 1, ttftMs: 200, streamMs: 500, durationMs: 700 },
    ]);
    const first = layout.requests[0]!;
    expect(first.segments.map((segment) => [segment.kind, segment.attempt])).toEqual([
      ["wait", 1],
      ["discarded", 1],
      ["wait", 2],
      ["stream", 2],
    ]);
    expect(first.resets).toEqual([
      {
        attempt: 1,
        reason: "server_error",
        error: { code: "server_error", retryable: true, name: "ServerError", message: "529" },
        ms: T0 + 600,
        x: 600 / 3600,
      },
    ]);
    expect(first.usage).toEqual(usage1);
    expect(first.toolCalls).toBe(3);

    // c3 starts after c1 ended: it reuses lane 0 while c2 still runs in lane 1.
    expect(
      layout.tools.map(({ toolCallId, toolName, lane, status, durationMs }) => [
        toolCallId,
        toolName,
        lane,
        status,
        durationMs,
      ]),
    ).toEqual([
      ["c1", "current_time", 0, "completed", 95],
      ["c2", "ask_agent", 1, "failed", 398],
      ["c3", "todo_list", 0, "completed", 299],
    ]);
    expect(layout.tools[1]?.error).toEqual({
      code: "tool",
      retryable: false,
      name: "ToolError",
      message: "no helper",
    });
    expect(layout.toolLanes).toBe(2);

    expect(layout.waits).toMatchObject([
      { kind: "compaction", status: "completed", lane: 0, tokenUsed: 40, durationMs: 600 },
    ]);
    expect(layout.waits[0]?.usage?.completion).toBe(40);
    expect(layout.tokens).toEqual([
      { index: 0, iteration: 1, final: false, usage: usage1 },
      { index: 1, iteration: 2, final: true, usage: usage2 },
    ]);
    expect(layout.context).toEqual({ tokenUsed: 40, tokenLimit: 4000, ratio: 0.01, threshold: 0.7 });
  });

  it("follows the context ratio request by request while the chat runs", () => {
    const events = scriptedChat();
    const model = build(events.slice(0, 10));
    const chat = model.latest()!;
    expect(layoutTimeline(chat).context).toEqual({
      tokenUsed: 1050,
      tokenLimit: 4000,
      ratio: 1050 / 4000,
      threshold: 0.7,
    });
    const untilAnswered = build(events.slice(0, 25)).latest()!;
    expect(layoutTimeline(untilAnswered).context.tokenUsed).toBe(1380);
  });

  it("keeps running items open up to `now`, and the live band and request end there", () => {
    const events = scriptedChat();
    // In the middle of the retried stream: ModelStreamSegmentStart attempt 2 at 1000 ms.
    const chat = build(events.slice(0, 9)).latest()!;
    expect(chat.status).toBe("running");
    const layout = layoutTimeline(chat, T0 + 2000);
    expect(layout.endMs).toBe(T0 + 2000);
    expect(layout.iterations).toMatchObject([{ iteration: 1, isOpen: true, x1: 1 }]);
    expect(layout.requests).toMatchObject([{ status: "running", attempts: 2, x1: 1, durationMs: 1990 }]);
    // `now` before the last event (a browser clock behind the host's): the last event wins.
    expect(layoutTimeline(chat, T0).endMs).toBe(T0 + 1000);
  });

  it("ends a request at the first event that follows its stream when no ModelResponse marks it", () => {
    // Hosts from before per-request ModelResponse events.
    const events = scriptedChat().filter(
      (event) => !(event.kind === "ModelResponse" && event.purpose === "chat"),
    );
    const layout = layoutTimeline(build(events).latest()!);
    expect(layout.requests.map((request) => [request.status, request.durationMs, request.usage])).toEqual([
      ["completed", 1390, null],
      ["completed", 700, null],
    ]);
    expect(layout.tokens).toEqual([]);
    const withoutStates = events.filter((event) => event.kind !== "StateChanged");
    expect(layoutTimeline(build(withoutStates).latest()!).requests.map((request) => request.endMs)).toEqual([
      T0 + 1500,
      T0 + 3600,
    ]);
  });

  it("marks a failed stream failed and a cancelled chat's running tool and wait cancelled", () => {
    const at = chatEvents("chat-9");
    const model = build([
      at(0, { kind: "ChatStarted", text: "go" }),
      at(0, { kind: "ModelRequest", final: false, messageCount: 1 }, 1),
      iterationState(at, 50, "failed", 1),
      at(60, { kind: "ModelRequest", final: false, messageCount: 1 }, 2),
      at(70, { kind: "ModelResponse", content: "", toolCalls: 1, usage: usage1, purpose: "chat" }, 2),
      at(80, { kind: "ToolCallStarted", toolName: "slow", toolCallId: "s1", arguments: "{}" }, 2),
      at(90, { kind: "ContextCompaction", phase: "started", topic: "x" }),
      at(200, {
        kind: "ChatFailed",
        error: {
          code: "cancelled",
          retryable: false,
          name: "ChatCancelledError",
          message: "the chat was cancelled",
        },
        cancelled: true,
      }),
    ]);
    const layout = layoutTimeline(model.get("chat-9")!);
    expect(layout.status).toBe("cancelled");
    expect(layout.requests.map((request) => request.status)).toEqual(["failed", "completed"]);
    expect(layout.tools).toMatchObject([{ status: "cancelled", durationMs: 120 }]);
    expect(layout.waits).toMatchObject([{ kind: "compaction", status: "cancelled", topic: "x" }]);
    expect(layout.context).toMatchObject({ tokenLimit: null, ratio: null, threshold: 0.7 });
  });

  it("replays a chat whose beginning was not kept: requests and tools from what remains", () => {
    // From c1's completion on: its start, and c2's, are inferred from the measured durations.
    const tail = scriptedChat().slice(14);
    const chat = build(tail).latest()!;
    expect(chat.text).toBeNull();
    expect(chat.startMs).toBe(T0 + 1900 - 398);
    expect(chat.tools.map((tool) => [tool.toolCallId, tool.startMs, tool.status])).toEqual([
      ["c1", T0 + 1600 - 95, "completed"],
      ["c3", T0 + 1700, "completed"],
      ["c2", T0 + 1900 - 398, "failed"],
    ]);
    expect(chat.tools.map((tool) => tool.lane)).toEqual([0, 0, 1]);
    expect(chat.requests.map((request) => request.iteration)).toEqual([2]);
  });

  it("keeps chats apart, ignores session-level events, and ends a manual compaction's chat", () => {
    const session = chatEvents("");
    const compaction = chatEvents("chat-2");
    const model = build([
      ...scriptedChat(),
      session(4000, { kind: "StateChanged", machine: "session", state: "idle" }),
      compaction(5000, { kind: "ContextCompaction", phase: "started", topic: "budget" }),
      compaction(5400, {
        kind: "ContextCompaction",
        phase: "failed",
        error: { code: "internal", retryable: false, name: "E", message: "empty" },
      }),
    ]);
    expect([...model.chats.keys()]).toEqual(["chat-1", "chat-2"]);
    expect(model.latest()).toMatchObject({ chatId: "chat-2", status: "failed", endMs: T0 + 5400 });
    expect(model.latest()?.waits).toMatchObject([{ kind: "compaction", status: "failed", topic: "budget" }]);
    expect(model.apply({ kind: "ChatStarted", chatId: "x", ts: "not a date", iteration: 0 })).toBeUndefined();
  });
});

describe("approval waits", () => {
  function approvalChat(chatId: string) {
    const at = chatEvents(chatId);
    const request = (ms: number, toolName: string, toolCallId: string) =>
      at(ms, { kind: "ToolApprovalRequested", toolName, toolCallId, arguments: "{}" }, 1);
    const resolve = (ms: number, toolName: string, toolCallId: string, approved: boolean, reason?: string) =>
      at(
        ms,
        { kind: "ToolApprovalResolved", toolName, toolCallId, approved, ...(reason ? { reason } : {}) },
        1,
      );
    const start = [
      at(0, { kind: "ChatStarted", text: "go" }),
      at(10, { kind: "ModelRequest", final: false, messageCount: 1 }, 1),
      at(100, { kind: "ModelResponse", content: "", toolCalls: 1, usage: usage1, purpose: "chat" }, 1),
    ];
    return { at, request, resolve, start };
  }

  it("draws a wait from the request until its approval", () => {
    const { at, request, resolve, start } = approvalChat("chat-a");
    const chat = build([
      ...start,
      request(200, "write_file", "w1"),
      resolve(1200, "write_file", "w1", true),
      at(1250, { kind: "ToolCallStarted", toolName: "write_file", toolCallId: "w1", arguments: "{}" }, 1),
      at(
        1300,
        { kind: "ToolCallCompleted", toolName: "write_file", toolCallId: "w1", result: "ok", durationMs: 50 },
        1,
      ),
      at(1400, { kind: "ChatCompleted", result: "done", usage: usage1, tokenUsed: 1050 }),
    ]).get("chat-a")!;
    const layout = layoutTimeline(chat);
    expect(layout.waits).toMatchObject([
      {
        kind: "approval",
        toolName: "write_file",
        toolCallId: "w1",
        status: "completed",
        approved: true,
        reason: null,
        lane: 0,
        startMs: T0 + 200,
        endMs: T0 + 1200,
        durationMs: 1000,
      },
    ]);
    expect(layout.waitLanes).toBe(1);
  });

  it("keeps a denial and its reason", () => {
    const { at, request, resolve, start } = approvalChat("chat-d");
    const chat = build([
      ...start,
      request(200, "delete_file", "d1"),
      resolve(700, "delete_file", "d1", false, "not this one"),
      at(900, { kind: "ChatCompleted", result: "ok", usage: usage1, tokenUsed: 1050 }),
    ]).get("chat-d")!;
    expect(layoutTimeline(chat).waits).toMatchObject([
      {
        kind: "approval",
        toolName: "delete_file",
        toolCallId: "d1",
        status: "completed",
        approved: false,
        reason: "not this one",
        durationMs: 500,
      },
    ]);
  });

  it("puts two approvals pending at once in two lanes, each ended by its own resolution", () => {
    const { at, request, resolve, start } = approvalChat("chat-p");
    const chat = build([
      ...start,
      request(200, "write_file", "p1"),
      request(200, "run_shell", "p2"),
      // Resolved in the other order: matched by toolCallId, not by the latest open wait.
      resolve(600, "run_shell", "p2", false, "no shell"),
      resolve(900, "write_file", "p1", true),
      request(1000, "write_file", "p3"),
      resolve(1100, "write_file", "p3", true),
      at(1200, { kind: "ChatCompleted", result: "ok", usage: usage1, tokenUsed: 1050 }),
    ]).get("chat-p")!;
    const layout = layoutTimeline(chat);
    expect(layout.waits).toMatchObject([
      { kind: "approval", toolCallId: "p1", lane: 0, durationMs: 700, approved: true },
      { kind: "approval", toolCallId: "p2", lane: 1, durationMs: 400, approved: false, reason: "no shell" },
      { kind: "approval", toolCallId: "p3", lane: 0, durationMs: 100, approved: true },
    ]);
    expect(layout.waitLanes).toBe(2);
  });

  it("ends an approval never resolved at the chat's failure", () => {
    const { at, request, start } = approvalChat("chat-f");
    const chat = build([
      ...start,
      request(200, "write_file", "f1"),
      at(2200, {
        kind: "ChatFailed",
        error: { code: "internal", retryable: false, name: "Error", message: "host stopped" },
        cancelled: false,
      }),
    ]).get("chat-f")!;
    expect(chat.status).toBe("failed");
    expect(layoutTimeline(chat, T0 + 9000).waits).toMatchObject([
      {
        kind: "approval",
        toolCallId: "f1",
        status: "cancelled",
        approved: null,
        endMs: T0 + 2200,
        durationMs: 2000,
      },
    ]);
  });
});

describe("sub-agent lanes", () => {
  it("draws each asked chat as a nested lane under the ask_agent call, its tool steps inside", () => {
    const at = chatEvents();
    const keeper = { agent: "keeper", session: "bot-s1", chatId: "k1" };
    const smith = { agent: "smith", session: "keeper-bot-s1", chatId: "m1" };
    const step = (source: typeof keeper, fields: object): EventBody =>
      ({
        kind: "ToolCallProgress",
        toolName: "ask_agent",
        toolCallId: "ask_1",
        source,
        ...fields,
      }) as EventBody;
    const model = new TimelineModel();
    for (const event of [
      at(0, { kind: "ChatStarted", text: "go" }),
      at(100, { kind: "ToolCallStarted", toolName: "ask_agent", toolCallId: "ask_1", arguments: "{}" }, 1),
      at(200, step(keeper, { step: "chat_started" }), 1),
      at(300, step(keeper, { step: "tool_started", tool: "ask_agent", sourceToolCallId: "a1" }), 1),
      at(400, step(smith, { step: "chat_started" }), 1),
      at(500, step(smith, { step: "tool_started", tool: "open_vault", sourceToolCallId: "v1" }), 1),
      at(700, step(smith, { step: "tool_completed", tool: "open_vault", sourceToolCallId: "v1" }), 1),
      at(800, step(smith, { step: "chat_completed" }), 1),
      at(850, step(keeper, { step: "tool_completed", tool: "ask_agent", sourceToolCallId: "a1" }), 1),
      at(
        900,
        {
          kind: "ToolApprovalRequested",
          toolName: "open_safe",
          toolCallId: "s1",
          arguments: "{}",
          heldBy: keeper,
        },
        1,
      ),
    ]) {
      model.apply(event);
    }
    const chat = model.get("chat-1")!;
    expect(chat.children.map((lane) => lane.chatId)).toEqual(["k1", "m1"]);
    // Running: drawn to "now".
    const layout = layoutTimeline(chat, T0 + 1000);
    expect(layout.children).toEqual([
      expect.objectContaining({
        agent: "keeper",
        depth: 1,
        toolCallId: "ask_1",
        status: "running",
        startMs: T0 + 200,
        endMs: T0 + 1000,
        x0: 0.2,
        x1: 1,
      }),
      expect.objectContaining({
        agent: "smith",
        depth: 2,
        status: "completed",
        startMs: T0 + 400,
        endMs: T0 + 800,
      }),
    ]);
    expect(layout.children[0]!.steps.map((s) => [s.toolName, s.status])).toEqual([
      ["ask_agent", "completed"],
      ["open_safe", "awaiting-approval"],
    ]);
    expect(layout.children[1]!.steps).toEqual([
      expect.objectContaining({ toolName: "open_vault", status: "completed", x0: 0.5, x1: 0.7 }),
    ]);
    // The root waits for the held call, and the wait names who holds it.
    expect(layout.waits).toEqual([
      expect.objectContaining({
        kind: "approval",
        toolName: "open_safe",
        heldBy: { agent: "keeper", session: "bot-s1" },
      }),
    ]);

    // The asking chat ends: its lanes end with it.
    model.apply(
      at(1200, {
        kind: "ChatFailed",
        error: { code: "cancelled", retryable: false, message: "stop" },
        cancelled: true,
      }),
    );
    const ended = layoutTimeline(model.get("chat-1")!);
    expect(ended.children.map((lane) => [lane.agent, lane.status, lane.endMs - T0])).toEqual([
      ["keeper", "cancelled", 1200],
      ["smith", "completed", 800],
    ]);
  });
});

describe("time axis", () => {
  it("places round ticks and formats durations", () => {
    expect(timeTicks(3600).map((tick) => tick.label)).toEqual([
      "0 ms",
      "500 ms",
      "1 s",
      "1.5 s",
      "2 s",
      "2.5 s",
      "3 s",
      "3.5 s",
    ]);
    expect(timeTicks(95_000).length).toBeLessThanOrEqual(9);
    expect(formatDuration(42)).toBe("42 ms");
    expect(formatDuration(12_400)).toBe("12 s");
    expect(formatDuration(125_000)).toBe("2 min 5 s");
  });
});
