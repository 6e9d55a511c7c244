import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { ThinkingBlock } from "../../src/llm/types.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * Anthropic thinking blocks (with their signatures, redacted ones too) and reasoning
 * content go into the assistant message and are replayed verbatim on every later request.
 */

const look = defineTool({
  name: "look",
  description: "Looks.",
  parameters: z.object({}),
  execute: () => "seen",
});
const firstBlocks: ThinkingBlock[] = [
  { type: "thinking", thinking: "I should look first.", signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3h==" },
  { type: "redacted_thinking", data: "EmwKAhgBEgy3va3pzix/LafPsn4a" },
];
const secondBlocks: ThinkingBlock[] = [{ type: "thinking", thinking: "Now I know.", signature: "sig-2" }];

describe("thinking blocks", () => {
  it("are kept in the assistant message and replayed in the next request and the next chat", async () => {
    const { agent, backend } = await createTestAgent({
      script: [
        { toolCalls: [{ id: "l1", name: "look" }], thinkingBlocks: firstBlocks, reasoning: "look first" },
        { text: "I saw it.", thinkingBlocks: secondBlocks },
        { text: "Bye." },
      ],
      tools: [look],
      options: { reasoningEffort: "high" },
    });
    await agent.chat("look");
    const firstAssistant = {
      role: "assistant",
      content: "",
      toolCalls: [{ id: "l1", name: "look", arguments: "{}" }],
      reasoningContent: "look first",
      thinkingBlocks: firstBlocks,
    };
    expect(backend.requests[1]?.messages[2]).toEqual(firstAssistant);

    await agent.chat("bye");
    const replayed = backend.requests[2]!.messages;
    expect(replayed[2]).toEqual(firstAssistant);
    expect(replayed[4]).toEqual({ role: "assistant", content: "I saw it.", thinkingBlocks: secondBlocks });
    expect(agent.messages[3]).toEqual(replayed[4]);
  });
});
