import { describe, expect, it } from "vitest";
import { createEventLogger } from "../../src/cli/commands/tail.js";
import type { AgentEvent } from "../../src/events/types.js";

/** `tail` shows an agent tree nested: a child chat's lines one step in per level, under its asker's. */

const at = { ts: "2026-01-01T12:00:00.000Z", iteration: 0 };

function logged(events: AgentEvent[]): string[] {
  let text = "";
  const stdout = {
    write: (chunk: string) => {
      text += chunk;
      return true;
    },
    isTTY: false,
  } as unknown as NodeJS.WritableStream;
  const logger = createEventLogger({ stdout });
  for (const event of events) logger.write(event);
  return text.trimEnd().split("\n");
}

describe("tail with an agent tree", () => {
  it("indents each child chat's events under the chat that asked it, one step per level", () => {
    const root = { agent: "lead", session: "s1", chatId: "c1" };
    const mid = { agent: "mid", session: "lead-s1", chatId: "c2" };
    const lines = logged([
      { ...at, ...root, seq: 1, kind: "ChatStarted", text: "go" },
      {
        ...at,
        ...root,
        seq: 2,
        kind: "ToolCallStarted",
        toolName: "ask_agent",
        toolCallId: "k1",
        arguments: "{}",
      },
      { ...at, ...mid, seq: 1, kind: "ChatStarted", text: "go", parent: { ...root, toolCallId: "k1" }, root },
      {
        ...at,
        agent: "leaf",
        session: "mid-lead-s1",
        chatId: "c3",
        seq: 1,
        kind: "ChatStarted",
        text: "go",
        parent: { ...mid, toolCallId: "k2" },
        root,
      },
      {
        ...at,
        ...root,
        seq: 3,
        kind: "ToolCallProgress",
        toolName: "ask_agent",
        toolCallId: "k1",
        source: { agent: "leaf", session: "mid-lead-s1", chatId: "c3" },
        step: "text",
        text: "hello",
      },
    ]);
    expect(lines).toEqual([
      "12:00:00.000 lead/s1 #1 ChatStarted user go",
      "12:00:00.000 lead/s1 #2 ToolCallStarted ask_agent({}) k1",
      "└ 12:00:00.000 mid/lead-s1 #1 ChatStarted user go",
      "  └ 12:00:00.000 leaf/mid-lead-s1 #1 ChatStarted user go",
      '12:00:00.000 lead/s1 #3 ToolCallProgress ask_agent k1 ← leaf/mid-lead-s1 "hello"',
    ]);
  });
});
