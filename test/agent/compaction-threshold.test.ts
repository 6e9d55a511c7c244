import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { compactionInstruction, summaryMessage } from "../../machines/compaction.machine.js";
import type { Message } from "../../src/llm/types.js";
import { canCallTools } from "../../src/llm/types.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTempHistories, createTestAgent } from "../support/agent-harness.js";

/**
 * The post-chat compaction check on both sides of the threshold, against a real
 * SQLite history: below the ratio the chat's messages are appended; at or above it the history is
 * replaced by ONE user message holding the summary; an empty summary loses nothing.
 */

const lookup = defineTool({
  name: "lookup",
  description: "Looks something up.",
  parameters: z.object({}),
  execute: () => "42",
});

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

/** tokenLimit 1,000 and the default ratio 0.7: the last request's prompt + completion decides. */
function scriptFor(lastPrompt: number, lastCompletion: number, summaryText: string) {
  return [
    { toolCalls: [{ id: "call_1", name: "lookup" }], usage: { prompt: 900, completion: 10 } },
    { text: "The answer is 42.", usage: { prompt: lastPrompt, completion: lastCompletion } },
    { text: summaryText, usage: { prompt: 800, completion: 33 } },
  ];
}

const chatMessages: Message[] = [
  { role: "user", content: "what is it?" },
  { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "lookup", arguments: "{}" }] },
  { role: "tool", toolCallId: "call_1", toolName: "lookup", content: "42" },
  { role: "assistant", content: "The answer is 42." },
];

describe("compaction after a chat", () => {
  it("just below the ratio (699 / 1000): the chat's messages are appended, nothing is compacted", async () => {
    const history = histories.open();
    const { agent, backend, eventsOf } = await createTestAgent({
      script: scriptFor(600, 99, "unused"),
      tools: [lookup],
      history,
      options: { tokenLimit: 1000 },
    });
    await agent.chat("what is it?");

    expect(backend.requests).toHaveLength(2);
    expect(eventsOf("ContextCompaction")).toEqual([]);
    expect(await history.restore()).toEqual(chatMessages);
    expect(agent.messages).toEqual(chatMessages);
    expect(agent.tokenUsed).toBe(699);
  });

  it("at the ratio (700 / 1000): history and context become ONE user message holding the summary", async () => {
    const history = histories.open();
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [...scriptFor(650, 50, "  The user asked; the answer was 42.  "), { text: "Still 42." }],
      tools: [lookup],
      history,
      options: { tokenLimit: 1000, reasoningEffort: "medium" },
    });
    const { result, usage } = await agent.chat("what is it?");
    expect(result).toBe("The answer is 42.");

    const summary = summaryMessage("The user asked; the answer was 42.");
    expect(summary.role).toBe("user");
    expect(await history.restore()).toEqual([summary]);
    expect(agent.messages).toEqual([summary]);
    expect(agent.tokenUsed).toBe(33);
    // The summary request is one of the chat's requests: it is billed with them.
    expect(usage.completion).toBe(10 + 50 + 33);

    // One non-streaming request on the whole conversation plus the instruction, no callable tool.
    const request = backend.requests[2]!;
    expect(request.streaming).toBe(false);
    expect(request.messages.slice(1)).toEqual([
      ...chatMessages,
      { role: "user", content: compactionInstruction(null) },
    ]);
    expect(canCallTools(request.options)).toBe(false);
    expect(request.options.reasoningEffort).toBe("medium");
    expect(eventsOf("ContextCompaction").map((event) => [event.phase, event.tokenUsed])).toEqual([
      ["started", undefined],
      ["completed", 33],
    ]);
    expect(eventsOf("ChatCompleted")[0]).toMatchObject({ result: "The answer is 42.", tokenUsed: 33, usage });

    // The next chat starts from the summary: a stable prefix for the provider's prompt cache.
    await agent.chat("and now?");
    expect(backend.requests[3]?.messages.slice(1)).toEqual([summary, { role: "user", content: "and now?" }]);
    expect(await history.restore()).toEqual([
      summary,
      { role: "user", content: "and now?" },
      { role: "assistant", content: "Still 42." },
    ]);
  });

  it("an empty summary fails the compaction: the chat's messages are appended and the context is untouched", async () => {
    const history = histories.open();
    const earlier: Message[] = [
      { role: "user", content: "earlier" },
      { role: "assistant", content: "earlier answer" },
    ];
    await history.append(earlier);
    const { agent, eventsOf } = await createTestAgent({
      script: scriptFor(700, 300, "   "),
      tools: [lookup],
      history,
      options: { tokenLimit: 1000 },
    });
    const { result } = await agent.chat("what is it?");

    expect(result).toBe("The answer is 42.");
    expect(await history.restore()).toEqual([...earlier, ...chatMessages]);
    expect(agent.messages).toEqual([...earlier, ...chatMessages]);
    expect(agent.tokenUsed).toBe(1000);
    const phases = eventsOf("ContextCompaction");
    expect(phases.map((event) => event.phase)).toEqual(["started", "failed"]);
    expect(phases[1]?.error?.code).toBe("empty_summary");
    expect(eventsOf("ChatCompleted")).toHaveLength(1);
  });
});
