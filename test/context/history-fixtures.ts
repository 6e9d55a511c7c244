import type { Message } from "../../src/llm/types.js";

/** A conversation exercising every persisted shape: tool calls, thinking blocks, images. */
export const conversation: Message[] = [
  {
    role: "user",
    content: [
      { type: "text", text: "What is in this picture, and what time is it?" },
      { type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" },
      { type: "image", url: "https://example.com/cat.jpg" },
    ],
  },
  {
    role: "assistant",
    content: "Let me check the time.",
    reasoningContent: "The user wants two things.",
    thinkingBlocks: [
      { type: "thinking", thinking: "First the time.", signature: "sig-abc==" },
      { type: "redacted_thinking", data: "opaque-blob" },
    ],
    toolCalls: [
      { id: "call_1", name: "current_time", arguments: "{}" },
      { id: "call_2", name: "todo_list", arguments: '{"plan":[{"step":"answer","status":"pending"}]}' },
    ],
  },
  { role: "tool", toolCallId: "call_1", toolName: "current_time", content: "2026-12-02T17:04:05.123+01:00" },
  { role: "tool", toolCallId: "call_2", toolName: "todo_list", content: "Plan updated." },
  { role: "assistant", content: "A cat, and it is 17:04. ✓ 😀" },
];
