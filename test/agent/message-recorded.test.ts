import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineTool } from "../../src/tools/define-tool.js";
import { createControlledTool, createTestAgent, waitUntil } from "../support/agent-harness.js";

/** OnMessageRecorded sees every user, assistant and tool message; its exceptions are swallowed. */

const add = defineTool({
  name: "add",
  description: "Adds.",
  parameters: z.object({ a: z.number(), b: z.number() }),
  execute: ({ a, b }) => String(a + b),
});
const script = [
  { toolCalls: [{ id: "x", name: "add", arguments: { a: 1, b: 2 } }], text: "Adding." },
  { text: "It is 3." },
  { text: "You're welcome." },
];

describe("onMessageRecorded", () => {
  it("sees every user, assistant and tool message of every chat, in the order they happen", async () => {
    const { agent, recorded } = await createTestAgent({ script, tools: [add] });
    await agent.chat("1 + 2?");
    await agent.chat("thanks");
    expect(recorded).toEqual(agent.messages);
    expect(recorded.map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "assistant",
      "user",
      "assistant",
    ]);
  });

  it("a callback that throws changes nothing", async () => {
    const quiet = await createTestAgent({ script, tools: [add] });
    const noisy = await createTestAgent({
      script,
      tools: [add],
      options: {
        onMessageRecorded: () => {
          throw new Error("audit store down");
        },
      },
    });
    for (const harness of [quiet, noisy]) {
      await harness.agent.chat("1 + 2?");
      await harness.agent.chat("thanks");
    }
    expect(noisy.agent.messages).toEqual(quiet.agent.messages);
    expect(noisy.backend.requests).toEqual(quiet.backend.requests);
    expect(noisy.recorded).toEqual(quiet.recorded);
  });

  it("sees the cancelled results back-filled for a cancelled chat", async () => {
    // Regression pin: the history gets a `cancelled` tool message for every unfinished call
    //, so the audit trail must see them too or it shows dangling tool calls.
    const slow = createControlledTool("slow", z.object({ key: z.string() }));
    const { agent, recorded } = await createTestAgent({
      script: [{ toolCalls: [{ id: "k", name: "slow", arguments: { key: "k" } }] }],
      tools: [slow.tool],
    });
    const controller = new AbortController();
    const chat = agent.chat("go", { signal: controller.signal });
    await waitUntil(() => slow.calls.length === 1);
    controller.abort();
    await chat.catch(() => undefined);
    expect(agent.messages.map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
    expect(recorded).toEqual(agent.messages);
  });

  it("sees the messages tools append to the conversation", async () => {
    // Regression pin: ctx.appendMessage() messages are persisted after the tool results, so the
    // audit trail must see them too.
    const fetchImage = defineTool({
      name: "fetch_image",
      description: "Fetches an image.",
      parameters: z.object({}),
      execute: (_, context) => {
        context.appendMessage({
          role: "user",
          content: [{ type: "image", mediaType: "image/png", data: "iVBORw0KGgo=" }],
        });
        return "image attached";
      },
    });
    const { agent, recorded } = await createTestAgent({
      script: [{ toolCalls: [{ name: "fetch_image" }] }, { text: "A cat." }],
      tools: [fetchImage],
    });
    await agent.chat("show me");
    expect(agent.messages.map((message) => message.role)).toEqual([
      "user",
      "assistant",
      "tool",
      "user",
      "assistant",
    ]);
    expect(recorded).toEqual(agent.messages);
  });
});
