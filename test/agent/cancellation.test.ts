import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ChatCancelledError } from "../../src/agent/chat-errors.js";
import type { Message } from "../../src/llm/types.js";
import {
  createControlledTool,
  createTempHistories,
  createTestAgent,
  danglingToolCalls,
  settle,
  waitUntil,
} from "../support/agent-harness.js";

/**
 * A chat cancelled while tools run back-fills a `cancelled` result for every
 * unfinished call, so the history (a real SQLite file here) never holds a dangling tool call; the
 * chat rejects with ChatCancelledError and emits ChatFailed with cancelled: true.
 */

const CANCELLED = '{"error":"cancelled"}';

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

const toolCall = (key: string) => ({ id: `call_${key}`, name: "slow", arguments: { key } });
const toolResult = (key: string, content: string): Message => ({
  role: "tool",
  toolCallId: `call_${key}`,
  toolName: "slow",
  content,
});

describe("cancelling a chat", () => {
  it("while tools run (some finished, some running, some queued): every unfinished call gets a cancelled result", async () => {
    const slow = createControlledTool("slow", z.object({ key: z.string() }));
    const history = histories.open();
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [
        { text: "Working on it.", toolCalls: ["a", "b", "c", "d"].map(toolCall) },
        { text: "Next chat answer." },
      ],
      tools: [slow.tool],
      history,
      options: { maxConcurrentToolCalls: 2 },
    });
    const controller = new AbortController();
    const chat = agent.chat("do four things", { signal: controller.signal });
    await waitUntil(() => slow.calls.length === 2);
    slow.call("b").resolve("b is done");
    await waitUntil(() => slow.calls.length === 3);
    controller.abort();

    const error = await chat.then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(ChatCancelledError);
    // The tools still running were told to stop; the queued one never started.
    expect(slow.call("a").context.signal.aborted).toBe(true);
    expect(slow.call("c").context.signal.aborted).toBe(true);
    for (let round = 0; round < 5; round++) await settle();
    expect(slow.calls.map((call) => call.args.key)).toEqual(["a", "b", "c"]);
    // A late result of a cancelled call changes nothing.
    slow.call("a").resolve("too late");
    await settle();

    const expected: Message[] = [
      { role: "user", content: "do four things" },
      {
        role: "assistant",
        content: "Working on it.",
        toolCalls: ["a", "b", "c", "d"].map((key) => ({
          id: `call_${key}`,
          name: "slow",
          arguments: `{"key":"${key}"}`,
        })),
      },
      toolResult("a", CANCELLED),
      toolResult("b", "b is done"),
      toolResult("c", CANCELLED),
      toolResult("d", CANCELLED),
    ];
    expect(await history.restore()).toEqual(expected);
    expect(agent.messages).toEqual(expected);
    expect(danglingToolCalls(await history.restore())).toEqual([]);

    const failed = eventsOf("ChatFailed");
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ cancelled: true, iteration: 0, error: { name: "ChatCancelledError" } });
    expect(eventsOf("ChatCompleted")).toEqual([]);
    expect(eventsOf("ToolCallCompleted").map((event) => event.toolCallId)).toEqual(["call_b"]);

    // The next chat sends a valid history (no dangling call) and goes on normally.
    expect((await agent.chat("again")).result).toBe("Next chat answer.");
    expect(backend.requests[1]?.messages.slice(1, 7)).toEqual(expected);
  });

  it("while the model streams: rejects with ChatCancelledError, the user message is kept", async () => {
    const history = histories.open();
    const { agent, eventsOf } = await createTestAgent({
      script: [{ deltas: ["one ", "two ", "three"], delayMs: 2 }],
      history,
    });
    const controller = new AbortController();
    const chat = agent.chat("count", { signal: controller.signal });
    await waitUntil(() => eventsOf("ModelTextDelta").length === 1);
    controller.abort();
    await expect(chat).rejects.toBeInstanceOf(ChatCancelledError);

    expect(await history.restore()).toEqual([{ role: "user", content: "count" }]);
    expect(eventsOf("ChatFailed")[0]).toMatchObject({ cancelled: true });
    // Nothing of the cancelled stream arrives after the cancel.
    for (let round = 0; round < 10; round++) await settle();
    expect(eventsOf("ModelTextDelta").map((event) => event.delta)).toEqual(["one "]);
  });

  it("an already aborted signal cancels before any request", async () => {
    const { agent, backend } = await createTestAgent({ script: [{ text: "never" }] });
    await expect(agent.chat("hi", { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(
      ChatCancelledError,
    );
    expect(backend.requests).toEqual([]);
  });

  it("a chat cancelled before it starts still emits ChatStarted then ChatFailed, under a fresh chat id", async () => {
    const { agent, events } = await createTestAgent({ script: [{ text: "answered" }] });
    await agent.chat("first");
    const firstChatId = events[0]?.chatId;
    const before = events.length;
    await expect(agent.chat("too late", { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(
      ChatCancelledError,
    );
    const cancelled = events.slice(before);
    expect(cancelled.map((event) => event.kind)).toEqual(["ChatStarted", "ChatFailed"]);
    expect(cancelled[0]).toMatchObject({ text: "too late", iteration: 0 });
    expect(cancelled[1]).toMatchObject({
      error: { name: "ChatCancelledError", message: "the chat was cancelled before it started" },
      cancelled: true,
    });
    expect(cancelled[1]?.chatId).toBe(cancelled[0]?.chatId);
    expect(cancelled[0]?.chatId).not.toBe(firstChatId);
    expect(cancelled[0]?.chatId).not.toBe("");
  });
});
