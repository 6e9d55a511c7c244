import { describe, expect, it } from "vitest";
import type { AgentEvent } from "../../src/events/types.js";
import type { Script } from "../../src/testing/index.js";
import { createTestAgent } from "../support/agent-harness.js";

/** ChatOptions.onEvent: one chat's events only (the Agent Protocol streams one caller's chat from it). */

const script: Script = [
  { deltas: ["first ", "answer"], text: "first answer" },
  { deltas: ["second ", "answer"], text: "second answer" },
];

describe("a chat's own event listener", () => {
  it("sees every event of its chat, and none of another chat", async () => {
    const harness = await createTestAgent({ script });
    const seen: AgentEvent[] = [];
    await harness.agent.chat("one", { onEvent: (event) => seen.push(event) });
    await harness.agent.chat("two");
    const chatIds = new Set(seen.map((event) => event.chatId));
    expect(chatIds.size).toBe(1);
    const firstChat = harness.events.filter((event) => chatIds.has(event.chatId));
    expect(seen).toEqual(firstChat);
    expect(seen.at(0)?.kind).toBe("ChatStarted");
    expect(seen.flatMap((event) => (event.kind === "ModelTextDelta" ? [event.delta] : []))).toEqual([
      "first ",
      "answer",
    ]);
    expect(harness.events.length).toBeGreaterThan(seen.length);
  });

  it("a listener that throws changes nothing about the chat", async () => {
    const harness = await createTestAgent({ script });
    const result = await harness.agent.chat("one", {
      onEvent: () => {
        throw new Error("listener down");
      },
    });
    expect(result.result).toBe("first answer");
  });
});
