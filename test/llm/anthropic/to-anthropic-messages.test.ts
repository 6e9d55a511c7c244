import { describe, expect, it } from "vitest";
import { toAnthropicMessages } from "../../../src/llm/anthropic/to-anthropic-messages.js";
import type { Message } from "../../../src/llm/types.js";

describe("toAnthropicMessages", () => {
  it("moves leading system messages to system and turns a later one into user text", () => {
    const prompt = toAnthropicMessages([
      { role: "system", content: "Rule one." },
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello" },
      { role: "system", content: "Be brief from now on." },
      { role: "user", content: "Go on" },
    ]);

    expect(prompt.system).toBe("Rule one.");
    expect(prompt.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "Hi" }] },
      { role: "assistant", content: [{ type: "text", text: "Hello" }] },
      {
        role: "user",
        content: [
          { type: "text", text: "Be brief from now on." },
          { type: "text", text: "Go on" },
        ],
      },
    ]);
  });

  it("merges two user messages in a row (one left by a host that died mid-chat) into one user turn", () => {
    const prompt = toAnthropicMessages([
      { role: "user", content: "Hi" },
      { role: "assistant", content: "Hello" },
      { role: "user", content: "remember 42" },
      { role: "user", content: "what number?" },
    ]);
    expect(prompt.messages.map((message) => message.role)).toEqual(["user", "assistant", "user"]);
    expect(prompt.messages.at(-1)?.content).toEqual([
      { type: "text", text: "remember 42" },
      { type: "text", text: "what number?" },
    ]);
  });

  it("has no system field without a leading system message", () => {
    expect(toAnthropicMessages([{ role: "user", content: "Hi" }])).not.toHaveProperty("system");
  });

  it("replays thinking blocks first, then text, then tool_use; unparseable arguments become {}", () => {
    const assistant: Message = {
      role: "assistant",
      content: "Calling.",
      reasoningContent: "thoughts",
      thinkingBlocks: [
        { type: "thinking", thinking: "thoughts", signature: "sig-1" },
        { type: "redacted_thinking", data: "opaque" },
      ],
      toolCalls: [
        { id: "t1", name: "a", arguments: '{"x":1}' },
        { id: "t2", name: "b", arguments: '{"x":' },
        { id: "t3", name: "c", arguments: "[1,2]" },
        { id: "t4", name: "d", arguments: "" },
      ],
    };

    const { messages } = toAnthropicMessages([{ role: "user", content: "Go" }, assistant]);

    expect(messages[1]).toEqual({
      role: "assistant",
      content: [
        { type: "thinking", thinking: "thoughts", signature: "sig-1" },
        { type: "redacted_thinking", data: "opaque" },
        { type: "text", text: "Calling." },
        { type: "tool_use", id: "t1", name: "a", input: { x: 1 } },
        { type: "tool_use", id: "t2", name: "b", input: {} },
        { type: "tool_use", id: "t3", name: "c", input: {} },
        { type: "tool_use", id: "t4", name: "d", input: {} },
      ],
    });
  });

  it("converts images (base64 and URL) and tool results with parts", () => {
    const { messages } = toAnthropicMessages([
      {
        role: "user",
        content: [
          { type: "text", text: "What is this?" },
          { type: "image", mediaType: "image/jpeg", data: "AAAA" },
          { type: "image", url: "https://example.com/cat.png" },
        ],
      },
      { role: "assistant", content: "", toolCalls: [{ id: "t1", name: "shot", arguments: "{}" }] },
      {
        role: "tool",
        toolCallId: "t1",
        content: [
          { type: "text", text: "screenshot:" },
          { type: "image", mediaType: "image/png", data: "BBBB" },
        ],
      },
      { role: "tool", toolCallId: "t2", content: "" },
    ]);

    expect(messages[0]?.content).toEqual([
      { type: "text", text: "What is this?" },
      { type: "image", source: { type: "base64", media_type: "image/jpeg", data: "AAAA" } },
      { type: "image", source: { type: "url", url: "https://example.com/cat.png" } },
    ]);
    expect(messages[2]).toEqual({
      role: "user",
      content: [
        {
          type: "tool_result",
          tool_use_id: "t1",
          content: [
            { type: "text", text: "screenshot:" },
            { type: "image", source: { type: "base64", media_type: "image/png", data: "BBBB" } },
          ],
        },
        { type: "tool_result", tool_use_id: "t2" },
      ],
    });
  });

  it("leaves out empty text and drops a turn left with no content", () => {
    const { messages } = toAnthropicMessages([
      { role: "user", content: "Hi" },
      { role: "assistant", content: "" },
      {
        role: "user",
        content: [
          { type: "text", text: "" },
          { type: "text", text: "Again" },
        ],
      },
    ]);

    expect(messages).toEqual([
      {
        role: "user",
        content: [
          { type: "text", text: "Hi" },
          { type: "text", text: "Again" },
        ],
      },
    ]);
  });

  it("puts the cache breakpoint on the last block that can carry one", () => {
    const { messages } = toAnthropicMessages(
      [
        { role: "user", content: "Hi" },
        {
          role: "assistant",
          content: "",
          thinkingBlocks: [{ type: "thinking", thinking: "t", signature: "s" }],
        },
      ],
      { promptCaching: true },
    );
    expect(JSON.stringify(messages)).not.toContain("cache_control");

    const withTool = toAnthropicMessages(
      [
        { role: "user", content: "Hi" },
        { role: "assistant", content: "", toolCalls: [{ id: "t1", name: "a", arguments: "{}" }] },
        { role: "tool", toolCallId: "t1", content: "done" },
      ],
      { promptCaching: true },
    );
    expect(withTool.messages.at(-1)?.content).toEqual([
      { type: "tool_result", tool_use_id: "t1", content: "done", cache_control: { type: "ephemeral" } },
    ]);
  });
});
