import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTempHistories, createTestAgent } from "../support/agent-harness.js";

/**
 * A session's history lives in SQLite keyed by agent + session; a new agent on the same
 * file and key continues the conversation (tool calls and thinking blocks included).
 */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

const clock = defineTool({
  name: "clock",
  description: "Tells the time.",
  parameters: z.object({}),
  execute: () => "12:00",
});

describe("restoring a session from SQLite", () => {
  it("a second agent on the same file, agent and session restores the history", async () => {
    const first = await createTestAgent({
      script: [
        {
          toolCalls: [{ id: "tc", name: "clock" }],
          thinkingBlocks: [{ type: "thinking", thinking: "check the clock", signature: "sig-1" }],
        },
        { text: "It is noon." },
      ],
      tools: [clock],
      history: histories.open("bot", "s1"),
      name: "bot",
      session: "s1",
    });
    await first.agent.chat("what time is it?");
    const conversation = first.agent.messages;
    expect(conversation).toHaveLength(4);

    const second = await createTestAgent({
      script: [{ text: "Still noon." }],
      tools: [clock],
      history: histories.open("bot", "s1"),
      name: "bot",
      session: "s1",
    });
    expect(second.agent.messages).toEqual(conversation);
    await second.agent.chat("and now?");
    expect(second.backend.requests[0]?.messages.slice(1)).toEqual([
      ...conversation,
      { role: "user", content: "and now?" },
    ]);
    expect(second.backend.requests[0]?.messages[2]?.thinkingBlocks).toEqual([
      { type: "thinking", thinking: "check the clock", signature: "sig-1" },
    ]);

    // Other sessions and agents on the same file start empty.
    const otherSession = await createTestAgent({
      script: [],
      history: histories.open("bot", "s2"),
      session: "s2",
    });
    const otherAgent = await createTestAgent({
      script: [],
      history: histories.open("other", "s1"),
      name: "other",
    });
    expect(otherSession.agent.messages).toEqual([]);
    expect(otherAgent.agent.messages).toEqual([]);
  });
});
