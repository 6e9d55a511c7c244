import { describe, expect, it } from "vitest";
import { Context } from "../../src/context/context.js";
import { conversation } from "./history-fixtures.js";

describe("Context", () => {
  it("forks into a deep copy that changes independently", () => {
    const context = new Context(conversation, 1_234);
    const fork = context.fork();
    expect(fork.messages).toEqual(conversation);
    expect(fork.tokenUsed).toBe(1_234);

    fork.messages.push({ role: "user", content: "summarise" });
    fork.messages[1]!.toolCalls![0]!.arguments = '{"changed":true}';
    fork.tokenUsed = 10;
    expect(context.messages).toEqual(conversation);
    expect(context.tokenUsed).toBe(1_234);
  });

  it("does not alias the array it was built from", () => {
    const messages = [...conversation];
    const context = new Context(messages);
    messages.pop();
    expect(context.messages).toHaveLength(conversation.length);
  });

  it("clears messages and usage", () => {
    const context = new Context(conversation, 99);
    context.clear();
    expect(context.messages).toEqual([]);
    expect(context.tokenUsed).toBe(0);
  });
});
