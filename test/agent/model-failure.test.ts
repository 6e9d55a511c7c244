import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ChatFailedError } from "../../src/agent/chat-errors.js";
import { AuthenticationError, ServerError } from "../../src/llm/errors.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTempHistories, createTestAgent, danglingToolCalls } from "../support/agent-harness.js";

/**
 * A failed model request ends the chat with ChatFailedError and a ChatFailed event; the
 * chat's messages so far are still persisted (the user message, finished tool rounds).
 */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error("expected the chat to fail");
    },
    (error: unknown) => error,
  );
}

const ping = defineTool({
  name: "ping",
  description: "Pings.",
  parameters: z.object({}),
  execute: () => "pong",
});

describe("a failed model request", () => {
  it("non-retryable: one request, ChatFailedError, ChatFailed, the user message persisted", async () => {
    const history = histories.open();
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [{ error: new AuthenticationError("invalid x-api-key", { statusCode: 401 }) }],
      history,
    });
    const error = await failureOf(agent.chat("hello"));

    expect(error).toBeInstanceOf(ChatFailedError);
    expect((error as ChatFailedError).info).toEqual({
      code: "authentication",
      retryable: false,
      status: 401,
      name: "AuthenticationError",
      message: "invalid x-api-key",
    });
    expect(backend.requests).toHaveLength(1);
    expect(eventsOf("ChatFailed")).toEqual([
      expect.objectContaining({
        cancelled: false,
        iteration: 0,
        error: {
          code: "authentication",
          retryable: false,
          status: 401,
          name: "AuthenticationError",
          message: "invalid x-api-key",
        },
      }),
    ]);
    expect(eventsOf("ChatCompleted")).toEqual([]);
    expect(await history.restore()).toEqual([{ role: "user", content: "hello" }]);
    expect(agent.messages).toEqual([{ role: "user", content: "hello" }]);
  });

  it("retryable until attempts run out: resets, then ChatFailedError naming the last error", async () => {
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [
        { error: new ServerError("overloaded 1") },
        { error: new ServerError("overloaded 2") },
        { error: new ServerError("overloaded 3") },
      ],
    });
    const error = await failureOf(agent.chat("hello"));
    expect((error as ChatFailedError).info.name).toBe("ServerError");
    expect(backend.requests).toHaveLength(3);
    expect(eventsOf("ModelStreamSegmentReset").map((event) => event.attempt)).toEqual([1, 2]);
  });

  it("in iteration 2: the finished tool round is persisted, with no dangling call", async () => {
    const history = histories.open();
    const { agent } = await createTestAgent({
      script: [{ toolCalls: [{ id: "p", name: "ping" }] }, { error: new AuthenticationError("revoked") }],
      tools: [ping],
      history,
    });
    await expect(agent.chat("ping")).rejects.toBeInstanceOf(ChatFailedError);
    const stored = await history.restore();
    expect(stored.map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
    expect(danglingToolCalls(stored)).toEqual([]);
  });
});
