import { describe, expect, it } from "vitest";
import { z } from "zod";
import { AuthenticationError } from "../../src/llm/errors.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * Every event has agent, session, chatId, seq (strictly increasing per session), ts (ISO
 * 8601) and iteration (0 for chat-level events, the 1-based iteration otherwise).
 */

const ping = defineTool({
  name: "ping",
  description: "Pings.",
  parameters: z.object({}),
  execute: () => "pong",
});

/** Kinds that belong to the chat, not to one iteration. */
const CHAT_LEVEL = new Set(["ChatStarted", "ChatCompleted", "ChatFailed", "ContextCompaction"]);

describe("the event envelope", () => {
  it("holds for a tool chat, a compacting chat, a failed chat and a manual compaction", async () => {
    const { agent, events } = await createTestAgent({
      name: "envelope-bot",
      session: "sess-7",
      script: [
        { toolCalls: [{ name: "ping" }], deltas: ["Pinging", "…"], usage: { prompt: 10, completion: 5 } },
        { deltas: ["It ", "ponged."], reasoningDeltas: ["hm"], usage: { prompt: 800, completion: 10 } },
        { text: "Summary one.", usage: { prompt: 800, completion: 7 } },
        { error: new AuthenticationError("bad key") },
        { text: "Summary two.", usage: { prompt: 50, completion: 5 } },
      ],
      tools: [ping],
      options: { tokenLimit: 1000 },
    });
    await agent.chat("ping it");
    await expect(agent.chat("again")).rejects.toThrow("bad key");
    expect(await agent.compact("pings")).toBe(true);

    expect(events.length).toBeGreaterThan(40);
    const kinds = new Set(events.map((event) => event.kind));
    for (const kind of [
      "ChatStarted",
      "ModelRequest",
      "ModelStreamSegmentStart",
      "ModelTextDelta",
      "ModelReasoningDelta",
      "ToolCallStarted",
      "ToolCallCompleted",
      "ContextCompaction",
      "ModelResponse",
      "ChatCompleted",
      "ChatFailed",
      "StateChanged",
    ]) {
      expect(kinds).toContain(kind);
    }
    events.forEach((event, index) => {
      expect(event.agent).toBe("envelope-bot");
      expect(event.session).toBe("sess-7");
      expect(event.seq).toBe(index + 1);
      expect(new Date(event.ts).toISOString()).toBe(event.ts);
      expect(Number.isInteger(event.iteration)).toBe(true);
      if (CHAT_LEVEL.has(event.kind)) expect(event.iteration).toBe(0);
      if (event.kind === "StateChanged") {
        expect(event.iteration === 0).toBe(event.machine !== "iteration");
      } else if (!CHAT_LEVEL.has(event.kind) && event.kind !== "ModelResponse") {
        expect(event.iteration).toBeGreaterThanOrEqual(1);
      }
    });
    // One chat id per chat (and per manual compaction); every event of a chat carries it.
    const chatIds = events.map((event) => event.chatId);
    expect([...new Set(chatIds)]).toEqual(["chat-1", "chat-2", "chat-3"]);
    const started = events.filter((event) => event.kind === "ChatStarted").map((event) => event.chatId);
    expect(started).toEqual(["chat-1", "chat-2"]);
    expect(events.filter((event) => event.kind === "ModelRequest").map((event) => event.iteration)).toEqual([
      1, 2, 1,
    ]);
  });
});
