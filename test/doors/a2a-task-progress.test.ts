import { Role } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { profilesFromDefinitions } from "../../src/doors/a2a/a2a-agents.js";
import { approvalAnswer } from "../../src/doors/a2a/a2a-request-handler.js";
import { advanceProgress, initialProgress, type TaskRecord } from "../../src/doors/a2a/task-progress.js";
import type { AgentEvent, EventBody } from "../../src/events/types.js";

/** The pure parts of the A2A door: a task's state folded from its chat's events, approval answers, skills. */

const record: TaskRecord = {
  id: "task-1",
  agent: "assistant",
  contextId: "s1",
  text: "hi",
  messageId: "m1",
  createdAt: "2026-01-01T00:00:00.000Z",
  fromSeq: 1,
};

let seq = 0;
function event(chatId: string, body: EventBody): AgentEvent {
  seq += 1;
  return {
    agent: "assistant",
    session: "s1",
    chatId,
    seq,
    ts: `2026-01-01T00:00:0${seq % 10}.000Z`,
    iteration: 1,
    ...body,
  } as AgentEvent;
}

function fold(events: AgentEvent[]) {
  return events.reduce(
    (progress, next) => advanceProgress(progress, record.id, next),
    initialProgress(record),
  );
}

describe("a task's progress from its chat's events", () => {
  it("follows only the chat whose ChatStarted carries the task id, through an approval to the answer", () => {
    const progress = fold([
      event("other", { kind: "ChatStarted", text: "earlier", requestId: "task-0" }),
      event("other", {
        kind: "ChatCompleted",
        result: "not ours",
        usage: { prompt: 0, completion: 0, total: 0, cached: 0 },
        tokenUsed: 0,
      }),
      event("c1", { kind: "ChatStarted", text: "hi", requestId: "task-1" }),
      event("c1", {
        kind: "ToolApprovalRequested",
        toolName: "shell",
        toolCallId: "call-1",
        arguments: "{}",
      }),
    ]);
    expect(progress).toMatchObject({
      phase: "input-required",
      chatId: "c1",
      approval: { toolCallId: "call-1" },
    });
    const done = [
      event("c1", { kind: "ToolApprovalResolved", toolName: "shell", toolCallId: "call-1", approved: true }),
      event("c1", {
        kind: "ChatCompleted",
        result: "ours",
        usage: { prompt: 1, completion: 1, total: 2, cached: 0 },
        tokenUsed: 2,
      }),
    ].reduce((current, next) => advanceProgress(current, record.id, next), progress);
    expect(done).toMatchObject({ phase: "completed", result: "ours" });
  });

  it("is submitted before its chat starts, canceled or failed by ChatFailed, and failed by a refused request", () => {
    expect(fold([]).phase).toBe("submitted");
    const error = { code: "cancelled" as const, message: "stopped", retryable: false };
    expect(
      fold([
        event("c2", { kind: "ChatStarted", text: "hi", requestId: "task-1" }),
        event("c2", { kind: "ChatFailed", error, cancelled: true }),
      ]).phase,
    ).toBe("canceled");
    expect(
      fold([
        event("c3", { kind: "ChatStarted", text: "hi", requestId: "task-1" }),
        event("c3", { kind: "ChatFailed", error: { ...error, code: "internal" as const }, cancelled: false }),
      ]),
    ).toMatchObject({ phase: "failed", error: "stopped" });
    expect(initialProgress({ ...record, failure: { code: "overloaded", message: "busy" } })).toMatchObject({
      phase: "failed",
      error: "busy",
    });
  });
});

describe("an approval answer on an A2A task", () => {
  const message = (value: unknown) => ({
    messageId: "m2",
    contextId: "s1",
    taskId: "task-1",
    role: Role.ROLE_USER,
    parts: [
      {
        content: { $case: "data" as const, value },
        metadata: undefined,
        filename: "",
        mediaType: "application/json",
      },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  });

  it("reads toolCallId, approved, reason and arguments from the data part", () => {
    expect(
      approvalAnswer(message({ approval: { toolCallId: "call-1", approved: false, reason: "no" } })),
    ).toEqual({
      toolCallId: "call-1",
      approved: false,
      reason: "no",
    });
  });

  it.each([
    {},
    { approval: { toolCallId: "call-1" } },
    { approval: { toolCallId: "", approved: true } },
    { approval: { toolCallId: "c", approved: true, reason: 3 } },
  ])("refuses %j naming the shape it needs", (value) => {
    expect(() => approvalAnswer(message(value))).toThrow(
      /"approval": \{ "toolCallId": string, "approved": boolean/,
    );
  });
});

describe("the agents' A2A profiles", () => {
  it("has a skill per tool of each tool set the agent names", () => {
    const [profile] = profilesFromDefinitions([
      {
        name: "assistant",
        provider: "demo",
        model: "m",
        tools: ["current_time", "todo_list"],
        contextWindow: 1000,
      },
    ]);
    const names = profile?.skills.map((skill) => skill.name) ?? [];
    expect(names).toContain("current_time");
    expect(names.length).toBeGreaterThan(1);
    expect(profile?.skills.every((skill) => skill.description !== "")).toBe(true);
  });
});
