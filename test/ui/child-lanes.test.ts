import { describe, expect, it } from "vitest";
import type { AgentEvent, EventBody } from "../../src/events/types.js";
import { askAgentSession } from "../../src/tools/ask-agent.js";
import { ChildLanes, isAskedSessionOf } from "../../src/ui/public/child-lanes.js";

/** The sub-agent lanes' model (src/ui/public/child-lanes.js): the asking session's events → nested lanes. */

const T0 = Date.UTC(2025, 0, 1, 12, 0, 0);

/** Events of lead/s1's chat `root` at chosen times (ms after T0). */
function rootEvents() {
  let seq = 0;
  return (ms: number, body: EventBody, iteration = 1): AgentEvent =>
    ({
      agent: "lead",
      session: "s1",
      chatId: "root",
      seq: ++seq,
      ts: new Date(T0 + ms).toISOString(),
      iteration,
      ...body,
    }) as AgentEvent;
}

const keeper = { agent: "keeper", session: "lead-s1", chatId: "k1" };

/** A ToolCallProgress of lead's ask_agent call `ask_1`. */
function progress(source: { agent: string; session: string; chatId: string }, fields: object): EventBody {
  return {
    kind: "ToolCallProgress",
    toolName: "ask_agent",
    toolCallId: "ask_1",
    source,
    ...fields,
  } as EventBody;
}

describe("ChildLanes", () => {
  it("builds a lane of the asked chat: its text around its tool steps, and its end", () => {
    const at = rootEvents();
    const lanes = new ChildLanes();
    const events = [
      at(0, { kind: "ToolCallStarted", toolName: "ask_agent", toolCallId: "ask_1", arguments: "{}" }),
      at(10, progress(keeper, { step: "chat_started" })),
      at(20, progress(keeper, { step: "text", text: "Checking " })),
      at(30, progress(keeper, { step: "text", text: "the vault." })),
      at(40, progress(keeper, { step: "tool_started", tool: "open_vault", sourceToolCallId: "v1" })),
      at(90, progress(keeper, { step: "tool_completed", tool: "open_vault", sourceToolCallId: "v1" })),
      at(95, progress(keeper, { step: "tool_started", tool: "read_log", sourceToolCallId: "v2" })),
      at(
        97,
        progress(keeper, { step: "tool_failed", tool: "read_log", sourceToolCallId: "v2", text: "no log" }),
      ),
      at(100, progress(keeper, { step: "text", text: "door 7 open" })),
    ];
    for (const event of events) lanes.apply(event);
    const lane = lanes.get("k1")!;
    expect(lane).toMatchObject({
      agent: "keeper",
      session: "lead-s1",
      callKey: "root/ask_1",
      parent: null,
      depth: 1,
      status: "running",
      startMs: T0 + 10,
    });
    expect(lane.items).toEqual([
      { kind: "text", text: "Checking the vault." },
      expect.objectContaining({
        kind: "tool",
        toolName: "open_vault",
        status: "completed",
        startMs: T0 + 40,
        endMs: T0 + 90,
      }),
      expect.objectContaining({ kind: "tool", toolName: "read_log", status: "failed", error: "no log" }),
      { kind: "text", text: "door 7 open" },
    ]);
    expect(lanes.lanesOf("root", "ask_1")).toEqual([lane]);

    expect(lanes.apply(at(110, progress(keeper, { step: "chat_completed" })))).toEqual([lane]);
    expect(lane).toMatchObject({ status: "completed", endMs: T0 + 110 });
  });

  it("nests a chat the asked one asked under its ask_agent step, and a second attempt beside the first", () => {
    const at = rootEvents();
    const lanes = new ChildLanes();
    const smith = { agent: "smith", session: "keeper-lead-s1", chatId: "m1" };
    lanes.apply(at(0, progress(keeper, { step: "chat_started" })));
    lanes.apply(
      at(1, progress(keeper, { step: "tool_started", tool: "current_time", sourceToolCallId: "t0" })),
    );
    lanes.apply(at(2, progress(keeper, { step: "tool_started", tool: "ask_agent", sourceToolCallId: "a1" })));
    const changed = lanes.apply(at(3, progress(smith, { step: "chat_started" })));
    lanes.apply(at(4, progress(smith, { step: "text", text: "hello from below" })));
    const nested = lanes.get("m1")!;
    expect(nested).toMatchObject({ parent: { chatId: "k1", toolCallId: "a1" }, depth: 2 });
    // The lane and the ones above it changed (they are redrawn with it).
    expect(changed.map((lane) => lane.chatId)).toEqual(["m1", "k1"]);
    const askStep = lanes.get("k1")!.steps.get("a1")!;
    expect(askStep.lanes).toEqual(["m1"]);
    expect(lanes.lanesOf("root", "ask_1").map((lane) => lane.chatId)).toEqual(["k1"]);

    // keeper's chat fails and lead's call asks again: a new chat of keeper's session, beside the first.
    lanes.apply(at(5, progress(smith, { step: "chat_completed" })));
    lanes.apply(at(6, progress(keeper, { step: "chat_failed", text: "model down" })));
    lanes.apply(at(7, progress({ ...keeper, chatId: "k2" }, { step: "chat_started" })));
    expect(lanes.get("k1")).toMatchObject({ status: "failed", error: "model down" });
    // Steps still running when a chat fails were stopped with it.
    expect(lanes.get("k1")!.steps.get("t0")!.status).toBe("cancelled");
    expect(lanes.lanesOf("root", "ask_1").map((lane) => lane.chatId)).toEqual(["k1", "k2"]);
    expect(lanes.get("k2")).toMatchObject({ parent: null, depth: 1 });
    expect(lanes.treeOf("root").map((lane) => lane.chatId)).toEqual(["k1", "m1", "k2"]);
  });

  it("nests a relayed step under the ask_agent call its asker names, where the session name cannot tell", () => {
    const at = rootEvents();
    const lanes = new ChildLanes();
    // keeper asks smith and jones at once: both asked sessions are named keeper-lead-s1.
    const smith = { agent: "smith", session: "keeper-lead-s1", chatId: "m1" };
    const jones = { agent: "jones", session: "keeper-lead-s1", chatId: "j1" };
    const askedBy = (toolCallId: string) => ({
      agent: "keeper",
      session: "lead-s1",
      chatId: "k1",
      toolCallId,
    });
    lanes.apply(at(0, progress(keeper, { step: "chat_started" })));
    lanes.apply(at(1, progress(keeper, { step: "tool_started", tool: "ask_agent", sourceToolCallId: "a1" })));
    lanes.apply(at(2, progress(keeper, { step: "tool_started", tool: "ask_agent", sourceToolCallId: "a2" })));
    // jones (asked by a2) speaks first: from the name alone it would land under a1.
    lanes.apply(at(3, progress(jones, { step: "chat_started", asker: askedBy("a2") })));
    lanes.apply(at(4, progress(smith, { step: "chat_started", asker: askedBy("a1") })));
    expect(lanes.get("j1")).toMatchObject({ parent: { chatId: "k1", toolCallId: "a2" }, depth: 2 });
    expect(lanes.get("m1")).toMatchObject({ parent: { chatId: "k1", toolCallId: "a1" }, depth: 2 });
    expect(lanes.get("k1")!.steps.get("a1")!.lanes).toEqual(["m1"]);
    expect(lanes.get("k1")!.steps.get("a2")!.lanes).toEqual(["j1"]);
  });

  it("places a copy of a held call in its holder's lane, decidable from the root, after the text before it", () => {
    const at = rootEvents();
    const lanes = new ChildLanes();
    lanes.apply(at(0, progress(keeper, { step: "chat_started" })));
    // The root's copy comes first; keeper's text and its own step are relayed after it.
    const bubbled = lanes.apply(
      at(10, {
        kind: "ToolApprovalRequested",
        toolName: "open_safe",
        toolCallId: "s1",
        arguments: '{"code":"1234"}',
        heldBy: keeper,
      }),
    );
    expect(bubbled.map((lane) => lane.chatId)).toEqual(["k1"]);
    lanes.apply(at(11, progress(keeper, { step: "text", text: "Opening the safe." })));
    lanes.apply(
      at(
        12,
        progress(keeper, {
          step: "approval_requested",
          tool: "open_safe",
          sourceToolCallId: "s1",
          arguments: '{"code":"1234"}',
        }),
      ),
    );
    const lane = lanes.get("k1")!;
    expect(lane.items.map((item) => item.kind)).toEqual(["text", "tool"]);
    const step = lane.steps.get("s1")!;
    expect(step).toMatchObject({ status: "awaiting-approval", isAheadOfItsStep: false });
    expect(step.approval).toMatchObject({
      pending: true,
      decidable: true,
      arguments: '{"code":"1234"}',
      request: { agent: "lead", session: "s1", toolCallId: "s1", arguments: '{"code":"1234"}' },
    });
    // Text after the step's own relay goes after it.
    lanes.apply(at(13, progress(keeper, { step: "text", text: "waiting" })));
    expect(lane.items.map((item) => item.kind)).toEqual(["text", "tool", "text"]);

    lanes.apply(
      at(20, {
        kind: "ToolApprovalResolved",
        toolName: "open_safe",
        toolCallId: "s1",
        approved: true,
        heldBy: keeper,
      }),
    );
    expect(step.status).toBe("approved");
    expect(step.approval).toMatchObject({ pending: false, approved: true });
    lanes.apply(
      at(21, progress(keeper, { step: "tool_started", tool: "open_safe", sourceToolCallId: "s1" })),
    );
    expect(step.status).toBe("running");
    // Seen twice (the holder's relay after the root's copy): still one decision.
    lanes.apply(
      at(
        22,
        progress(keeper, {
          step: "approval_resolved",
          tool: "open_safe",
          sourceToolCallId: "s1",
          approved: true,
        }),
      ),
    );
    expect(step.status).toBe("running");
  });

  it("leaves a held call whose holder it has no lane of to the page (it changes nothing)", () => {
    const at = rootEvents();
    const lanes = new ChildLanes();
    expect(
      lanes.apply(
        at(0, {
          kind: "ToolApprovalRequested",
          toolName: "x",
          toolCallId: "c",
          arguments: "{}",
          heldBy: keeper,
        }),
      ),
    ).toEqual([]);
    expect(lanes.lanes.size).toBe(0);
    // Nor does an event of the session's own.
    expect(
      lanes.apply(at(1, { kind: "ToolApprovalRequested", toolName: "x", toolCallId: "c", arguments: "{}" })),
    ).toEqual([]);
  });

  it("ends the lanes still open with the asking call or chat, and closes their held calls", () => {
    const at = rootEvents();
    const lanes = new ChildLanes();
    lanes.apply(at(0, progress(keeper, { step: "chat_started" })));
    lanes.apply(
      at(1, {
        kind: "ToolApprovalRequested",
        toolName: "open_safe",
        toolCallId: "s1",
        arguments: "{}",
        heldBy: keeper,
      }),
    );
    const changed = lanes.apply(
      at(
        5,
        {
          kind: "ChatFailed",
          error: { code: "cancelled", retryable: false, message: "stopped" },
          cancelled: true,
        },
        0,
      ),
    );
    expect(changed.map((lane) => lane.chatId)).toEqual(["k1"]);
    expect(lanes.get("k1")).toMatchObject({ status: "cancelled", endMs: T0 + 5 });
    expect(lanes.get("k1")!.steps.get("s1")).toMatchObject({
      status: "cancelled",
      approval: { pending: false },
    });

    // The call's own end settles a lane whose last step was not relayed in time.
    const other = new ChildLanes();
    other.apply(at(0, progress(keeper, { step: "chat_started" })));
    other.apply(
      at(9, {
        kind: "ToolCallCompleted",
        toolName: "ask_agent",
        toolCallId: "ask_1",
        result: "ok",
        durationMs: 9,
      }),
    );
    expect(other.get("k1")).toMatchObject({ status: "completed", endMs: T0 + 9 });
    // Another call's end leaves it alone.
    const third = new ChildLanes();
    third.apply(at(0, progress(keeper, { step: "chat_started" })));
    expect(
      third.apply(
        at(9, { kind: "ToolCallCompleted", toolName: "x", toolCallId: "other", result: "", durationMs: 1 }),
      ),
    ).toEqual([]);
    expect(third.get("k1")!.status).toBe("running");
  });

  it("skips what is not an event or lacks a source", () => {
    const lanes = new ChildLanes();
    expect(lanes.apply(undefined as unknown as AgentEvent)).toEqual([]);
    expect(lanes.apply({ kind: "ToolCallProgress", chatId: "c", ts: "x" } as unknown as AgentEvent)).toEqual(
      [],
    );
    expect(lanes.lanes.size).toBe(0);
  });
});

describe("isAskedSessionOf", () => {
  it("agrees with the session name ask_agent derives, cut names included", () => {
    expect(isAskedSessionOf("keeper", "lead-s1", askAgentSession("keeper", "lead-s1"))).toBe(true);
    expect(isAskedSessionOf("keeper", "lead-s1", "keeper-lead-s2")).toBe(false);
    const long = "x".repeat(60);
    const cut = askAgentSession("agent", long);
    expect(cut).toHaveLength(64);
    expect(isAskedSessionOf("agent", long, cut)).toBe(true);
    expect(isAskedSessionOf("other", long, cut)).toBe(false);
  });
});
