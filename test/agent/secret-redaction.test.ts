import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ChatFailedError } from "../../src/agent/chat-errors.js";
import { AuthenticationError } from "../../src/llm/errors.js";
import { createSecretRedactor } from "../../src/text/secret-redactor.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent } from "../support/agent-harness.js";

/**
 * With a redactor, a configured secret reaches neither the model (through a
 * tool result), nor an event (a tool call's arguments, its result, a failure), nor the error a
 * failed chat rejects with.
 */

const KEY = "sk-ant-0123456789abcdef";

const printEnv = defineTool({
  name: "print_env",
  description: "Prints a variable.",
  parameters: z.object({ name: z.string() }),
  execute: () => `ANTHROPIC_API_KEY=${KEY}`,
});

describe("an agent with a secret redactor", () => {
  it("hides the secret in tool results, events and the chat's error", async () => {
    const { agent, backend, events } = await createTestAgent({
      script: [
        { toolCalls: [{ id: "t1", name: "print_env", arguments: { name: KEY } }] },
        { text: "done" },
        { error: new AuthenticationError(`invalid x-api-key ${KEY}`) },
      ],
      tools: [printEnv],
      redactor: createSecretRedactor([KEY]),
      maxAttempts: 1,
    });
    await agent.chat("print it");
    const rejection = agent.chat("again");
    await expect(rejection).rejects.toBeInstanceOf(ChatFailedError);
    await expect(rejection).rejects.toThrow("invalid x-api-key [redacted]");

    const toolResult = backend.requests[1]!.messages.find((message) => message.role === "tool");
    expect(toolResult?.content).toBe("ANTHROPIC_API_KEY=[redacted]");
    expect(JSON.stringify(events)).not.toContain(KEY);
    expect(events.find((event) => event.kind === "ToolCallStarted")).toMatchObject({
      arguments: '{"name":"[redacted]"}',
    });
    expect(events.find((event) => event.kind === "ChatFailed")).toMatchObject({
      error: { message: "invalid x-api-key [redacted]" },
    });
  });

  it("hides the secret in what a tool posts to the session (a background result) and offers tools the redactor", async () => {
    const posted: string[] = [];
    let redacted = "";
    const startLater = defineTool({
      name: "start_later",
      description: "Starts work whose result arrives later.",
      parameters: z.object({}),
      execute: (_, context) => {
        redacted = context.redact?.(`cut me ${KEY}`) ?? "no redact";
        context.post?.(`<task_result id="t">ANTHROPIC_API_KEY=${KEY}</task_result>`, { type: "task_result" });
        return "started";
      },
    });
    const { agent } = await createTestAgent({
      script: [{ toolCalls: [{ id: "t1", name: "start_later", arguments: {} }] }, { text: "done" }],
      tools: [startLater],
      redactor: createSecretRedactor([KEY]),
      post: (text) => posted.push(text),
    });
    await agent.chat("start it");
    expect(posted).toEqual(['<task_result id="t">ANTHROPIC_API_KEY=[redacted]</task_result>']);
    expect(redacted).toBe("cut me [redacted]");
  });

  it("hides a secret the model streams in pieces, in the deltas, the response and the chat's result", async () => {
    const { agent, eventsOf } = await createTestAgent({
      script: [
        {
          reasoning: `thinking of ${KEY}`,
          reasoningDeltas: ["thinking of sk-a", "nt-0123", "456789abcdef"],
          text: `the key is ${KEY}, sk-ant- is its prefix`,
          deltas: ["the key is sk-", "ant-01234567", "89abcdef, sk-ant-", " is its prefix"],
        },
      ],
      redactor: createSecretRedactor([KEY]),
    });
    const { result } = await agent.chat("tell me the key");
    expect(result).toBe("the key is [redacted], sk-ant- is its prefix");
    const deltas = eventsOf("ModelTextDelta").map((event) => event.delta);
    for (const delta of deltas) expect(delta).not.toMatch(/0123|abcdef/);
    expect(deltas.join("")).toBe("the key is [redacted], sk-ant- is its prefix");
    expect(
      eventsOf("ModelReasoningDelta")
        .map((event) => event.delta)
        .join(""),
    ).toBe("thinking of [redacted]");
    expect(eventsOf("ModelResponse")[0]?.content).toBe(result);
  });
});
