import { describe, expect, it } from "vitest";
import { estimateMessageBytes, estimateMessagesBytes } from "../../src/context/message-bytes.js";
import { createTestAgent } from "../support/agent-harness.js";

describe("agent.memoryBytes: what the session's messages hold in memory", () => {
  it("grows with each chat's messages, follows a compaction and drops to 0 at /new", async () => {
    const { agent } = await createTestAgent({
      script: [{ text: "a".repeat(2_000) }, { text: "short" }, { text: "the summary" }],
    });
    expect(agent.memoryBytes).toBe(0);
    await agent.chat("b".repeat(1_000));
    const first = agent.memoryBytes ?? 0;
    // Two bytes a character, at least: the user's 1,000 and the answer's 2,000.
    expect(first).toBeGreaterThan(6_000);
    expect(first).toBe(estimateMessagesBytes(agent.messages));

    await agent.chat("hi");
    const second = agent.memoryBytes ?? 0;
    expect(second - first).toBe(estimateMessagesBytes(agent.messages.slice(2)));

    expect(await agent.compact()).toBe(true);
    expect(agent.memoryBytes).toBe(estimateMessagesBytes(agent.messages));
    expect(agent.memoryBytes).toBeLessThan(first);

    await agent.reset();
    expect(agent.memoryBytes).toBe(0);
  });

  it("counts every text a message carries: content parts, tool calls, reasoning, thinking blocks", () => {
    const bare = estimateMessageBytes({ role: "assistant", content: "" });
    expect(estimateMessageBytes({ role: "assistant", content: "abcd" }) - bare).toBe(8);
    const rich = estimateMessageBytes({
      role: "assistant",
      content: [{ type: "text", text: "abcd" }],
      toolCalls: [{ id: "c1", name: "shell", arguments: '{"cmd":"ls"}' }],
      reasoningContent: "why",
      thinkingBlocks: [{ type: "thinking", thinking: "hmm", signature: "sig" }],
    });
    expect(rich - bare).toBeGreaterThan(2 * ("abcd".length + "c1shell".length + 12 + "why".length + 6));
  });
});
