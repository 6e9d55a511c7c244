import { afterEach, describe, expect, it, vi } from "vitest";
import { ChatCancelledError } from "../../src/agent/chat-errors.js";
import { createAgent } from "../../src/agent/create-agent.js";
import type { AgentEvent } from "../../src/events/types.js";
import { OpenAIChatBackend } from "../../src/llm/openai-chat/index.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import { chatTurnSse, type FakeOpenAI, stallAfterFrames, startFakeOpenAI } from "../../src/testing/index.js";
import { waitUntil } from "../support/agent-harness.js";

/**
 * Regression: cancelling a chat must abort its model request, not only stop
 * listening to it (a request left running holds a connection and may go on billing). Through the
 * real SDK against the fake server: the server sees the connection closed. Nothing else would
 * close it here: the stream stalls after its first delta, and every timeout is a minute away.
 */

let server: FakeOpenAI | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

describe("cancelling a chat", () => {
  it("aborts the model request that is streaming", async () => {
    const reply = chatTurnSse({ text: ["Thinking about ", "it for a long time"] });
    if (reply.type !== "sse") throw new Error("expected a stream");
    const firstDelta = reply.frames.findIndex((frame) => frame.includes("Thinking about"));
    server = await startFakeOpenAI({ chat: [stallAfterFrames(reply, firstDelta + 1)] });
    const events: AgentEvent[] = [];
    const agent = await createAgent({
      llm: new RetryingLlmClient({
        backend: new OpenAIChatBackend({ apiKey: "sk-test", baseUrl: server.baseUrl }),
      }),
      model: "gpt-fake",
      options: { streamIdleTimeoutMs: 60_000, onLog: (event) => events.push(event) },
    });
    const controller = new AbortController();
    const chat = agent.chat("hello", { signal: controller.signal }).catch((error: unknown) => error);
    await waitUntil(() => events.some((event) => event.kind === "ModelTextDelta"));
    expect(server.requests[0]?.isClosedEarly).toBe(false);

    controller.abort();

    expect(await chat).toBeInstanceOf(ChatCancelledError);
    await vi.waitFor(() => expect(server?.requests[0]?.isClosedEarly).toBe(true), { timeout: 10_000 });
    expect(server.requests).toHaveLength(1);
  });
});
