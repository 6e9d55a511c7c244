import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { summaryMessage } from "../../machines/compaction.machine.js";
import { ChatFailedError } from "../../src/agent/chat-errors.js";
import { ContextLengthExceededError } from "../../src/llm/errors.js";
import type { Message } from "../../src/llm/types.js";
import { createTempHistories, createTestAgent } from "../support/agent-harness.js";

/** A context-length error means the caller must compact, then retry. */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

const earlier: Message[] = [
  { role: "user", content: "Remember: the launch code is 4711." },
  { role: "assistant", content: "Noted: 4711." },
];
const tooLong = () => ({
  error: new ContextLengthExceededError("prompt is too long: 210000 tokens > 200000 maximum"),
});

describe("context length exceeded", () => {
  it("compacts the history before the chat once, then runs the same iteration again", async () => {
    const history = histories.open();
    await history.append(earlier);
    const { agent, backend, eventsOf } = await createTestAgent({
      script: [
        tooLong(),
        { text: "The code is 4711." },
        { text: "It is 4711.", usage: { prompt: 50, completion: 5 } },
      ],
      history,
    });
    const { result } = await agent.chat("What is the code?");
    expect(result).toBe("It is 4711.");

    const [refused, summaryRequest, retried] = backend.requests;
    expect(refused?.messages.slice(1)).toEqual([...earlier, { role: "user", content: "What is the code?" }]);
    expect(summaryRequest?.streaming).toBe(false);
    expect(summaryRequest?.messages.slice(1, 3)).toEqual(earlier);
    const summary = summaryMessage("The code is 4711.");
    expect(retried?.messages.slice(1)).toEqual([summary, { role: "user", content: "What is the code?" }]);
    // Both the retried request and the first one are iteration 1.
    expect(eventsOf("ModelRequest").map((event) => event.iteration)).toEqual([1, 1]);

    const stored = await history.restore();
    expect(stored).toEqual([
      summary,
      { role: "user", content: "What is the code?" },
      { role: "assistant", content: "It is 4711." },
    ]);
    expect(agent.messages).toEqual(stored);
    expect(eventsOf("ContextCompaction").map((event) => event.phase)).toEqual(["started", "completed"]);
    expect(eventsOf("ChatCompleted")).toHaveLength(1);
  });

  it("a second overflow in the same chat fails it, with nothing lost", async () => {
    const history = histories.open();
    await history.append(earlier);
    const { agent, backend } = await createTestAgent({
      script: [tooLong(), { text: "The code is 4711." }, tooLong()],
      history,
    });
    const failure = await agent.chat("What is the code?").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ChatFailedError);
    expect((failure as ChatFailedError).info.name).toBe("ContextLengthExceededError");
    expect(backend.requests).toHaveLength(3);
    // The compaction happened (history replaced), and the user's message was still persisted.
    expect(await history.restore()).toEqual([
      summaryMessage("The code is 4711."),
      { role: "user", content: "What is the code?" },
    ]);
  });

  it("with no history before the chat there is nothing to compact: the chat fails cleanly", async () => {
    const { agent, backend } = await createTestAgent({ script: [tooLong()] });
    const failure = await agent.chat("a very long message").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ChatFailedError);
    expect((failure as ChatFailedError).info.name).toBe("ContextLengthExceededError");
    expect(backend.requests).toHaveLength(1);
  });
});
