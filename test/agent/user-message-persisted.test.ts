import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ChatFailedError } from "../../src/agent/chat-errors.js";
import type { ContextHistory } from "../../src/context/context-history.js";
import { ServerError } from "../../src/llm/errors.js";
import type { Message } from "../../src/llm/types.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTempHistories, createTestAgent, danglingToolCalls } from "../support/agent-harness.js";

/**
 * A host that dies mid-chat took the user's message with it, because the chat's
 * messages were written only after the loop. The user message is now written before the first
 * model request; the writes after the loop add only what is not yet written.
 */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

/** A history that logs each write, so a test can see it relative to the model's requests. */
function loggingHistory(inner: ContextHistory, log: string[]): ContextHistory {
  const roles = (messages: readonly Message[]) => messages.map((message) => message.role).join(",");
  return {
    restore: () => inner.restore(),
    append: (messages) => {
      log.push(`append ${roles(messages)}`);
      return inner.append(messages);
    },
    replace: (messages) => {
      log.push(`replace ${roles(messages)}`);
      return inner.replace(messages);
    },
    clear: () => inner.clear(),
  };
}

describe("the user message is persisted when the chat starts", () => {
  it("is in the history before the first model request; the rest follows once, without duplicates", async () => {
    const log: string[] = [];
    const history = histories.open();
    const { agent } = await createTestAgent({
      script: (_request, index) => {
        log.push(`request ${index + 1}`);
        return index === 0 ? { toolCalls: [{ id: "t1", name: "clock" }] } : { text: "It is noon." };
      },
      tools: [
        defineTool({
          name: "clock",
          description: "Tells the time.",
          parameters: z.object({}),
          execute: () => "12:00",
        }),
      ],
      history: loggingHistory(history, log),
    });
    await agent.chat("what time is it?");
    expect(log).toEqual(["append user", "request 1", "request 2", "append assistant,tool,assistant"]);
    const stored = await history.restore();
    expect(stored.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(stored).toEqual(agent.messages);
  });

  it("a chat that dies mid-stream keeps the user message; the next one continues after it", async () => {
    const history = histories.open();
    const first = await createTestAgent({
      script: [
        { error: new ServerError("overloaded", { statusCode: 529 }), failAfterDeltas: 1, text: "Hal" },
      ],
      history,
      maxAttempts: 1,
    });
    const failure = await first.agent.chat("remember 42").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ChatFailedError);
    expect(await history.restore()).toEqual([{ role: "user", content: "remember 42" }]);

    // A new agent on the same history (the host restarted): two user messages in a row are a
    // valid conversation to continue from, and nothing is doubled.
    const second = await createTestAgent({ script: [{ text: "42." }], history: histories.open() });
    await second.agent.chat("what number?");
    expect(second.backend.requests[0]?.messages.slice(1)).toEqual([
      { role: "user", content: "remember 42" },
      { role: "user", content: "what number?" },
    ]);
    const stored = await history.restore();
    expect(stored).toEqual([
      { role: "user", content: "remember 42" },
      { role: "user", content: "what number?" },
      { role: "assistant", content: "42." },
    ]);
    expect(danglingToolCalls(stored)).toEqual([]);
  });
});
