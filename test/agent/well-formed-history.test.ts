import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { pinDatabase, statement } from "../../src/context/sqlite-statements.js";
import type { Message } from "../../src/llm/types.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTempHistories, createTestAgent } from "../support/agent-harness.js";

/**
 * One lone UTF-16 surrogate (half an emoji) poisoned a session for good: it was
 * stored and replayed on every request, and providers refuse such a body with a 400. Whatever the
 * source (the user's text, a tool's result, the model's own reply, an old history row), the
 * conversation and its history hold U+FFFD instead.
 */

let histories: ReturnType<typeof createTempHistories>;
beforeEach(() => {
  histories = createTempHistories();
});
afterEach(() => histories.cleanup());

const HIGH = "\ud83d";
const LOW = "\ude00";

const halfEmoji = defineTool({
  name: "half_emoji",
  description: "Returns half an emoji.",
  parameters: z.object({}),
  execute: () => `tool ${LOW} result`,
});

/** No lone surrogate in the messages: JSON escapes one as `\udXXX` (a whole pair stays as it is). */
function isWellFormedConversation(messages: readonly Message[]): boolean {
  return !/\\ud[89a-f][0-9a-f]{2}/i.test(JSON.stringify(messages));
}

describe("a lone surrogate never reaches the conversation or its history", () => {
  it("from the user, a tool and the model: requests, context and SQLite hold U+FFFD instead", async () => {
    const history = histories.open("bot", "s1");
    const { agent, backend } = await createTestAgent({
      script: [
        {
          text: `calling ${HIGH}`,
          toolCalls: [{ id: "t1", name: "half_emoji", arguments: `{"x":"${HIGH}"}` }],
        },
        { text: `model ${HIGH} reply 😀` },
        { text: "second" },
      ],
      tools: [halfEmoji],
      history,
      name: "bot",
      session: "s1",
    });
    await agent.chat(`user ${HIGH} text`);
    await agent.chat("again");

    const [, second, third] = backend.requests;
    expect(isWellFormedConversation(second!.messages)).toBe(true);
    expect(isWellFormedConversation(third!.messages)).toBe(true);
    expect(isWellFormedConversation(agent.messages)).toBe(true);
    const texts = third!.messages.map((message) => message.content);
    expect(texts).toContain("user \ufffd text");
    expect(texts).toContain("tool \ufffd result");
    expect(texts).toContain("model \ufffd reply 😀");
    expect(isWellFormedConversation(await history.restore())).toBe(true);
  });

  it("a history row stored before the fix is healed when the session is restored", async () => {
    const seeded = histories.open("bot", "old");
    await seeded.append([{ role: "user", content: "hello" }]);
    // Write the poisoned row as an older version did, straight into the file.
    const database = pinDatabase(new Database(histories.path));
    statement(database, "INSERT INTO messages (agent, session, position, message) VALUES (?, ?, ?, ?)").run(
      "bot",
      "old",
      1,
      JSON.stringify({ role: "assistant", content: `old ${HIGH} reply` }),
    );
    database.close();

    const { agent, backend } = await createTestAgent({
      script: [{ text: "fine" }],
      history: histories.open("bot", "old"),
      name: "bot",
      session: "old",
    });
    await agent.chat("still there?");
    expect(isWellFormedConversation(backend.requests[0]!.messages)).toBe(true);
    expect(backend.requests[0]!.messages.map((message) => message.content)).toContain("old \ufffd reply");
  });
});
