import { describe, expect, it } from "vitest";
import { z } from "zod";
import { ChatFailedError } from "../../src/agent/chat-errors.js";
import { createAgent } from "../../src/agent/create-agent.js";
import type { AgentEvent } from "../../src/events/types.js";
import { InvalidRequestError } from "../../src/llm/errors.js";
import { scriptedModel } from "../../src/testing/index.js";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool } from "../../src/tools/define-tool.js";

const echo = createToolSet({
  name: "echo",
  tools: [
    defineTool({
      name: "echo",
      description: "Returns its text.",
      parameters: z.object({ text: z.string() }),
      execute: ({ text }) => `echo: ${text}`,
    }),
  ],
});

function agentOn(llm: ReturnType<typeof scriptedModel>, events: AgentEvent[] = []) {
  return createAgent({
    llm,
    model: "m",
    toolSets: [echo],
    options: { onLog: (event) => events.push(event) },
  });
}

describe("scriptedModel", () => {
  it("plays turns as data through createAgent and records every request", async () => {
    const model = scriptedModel([
      { reasoning: "I should echo.", toolCalls: [{ name: "echo", arguments: { text: "hi" } }] },
      { text: "It said hi." },
    ]);
    const events: AgentEvent[] = [];
    const agent = await agentOn(model, events);

    const { result } = await agent.chat("say hi");

    expect(result).toBe("It said hi.");
    expect(model.requests).toHaveLength(2);
    expect(model.requests[0]?.messages.at(-1)).toMatchObject({ role: "user", content: "say hi" });
    expect(model.requests[1]?.messages.at(-1)).toMatchObject({
      role: "tool",
      toolCallId: "call_1_1",
      content: "echo: hi",
    });
    expect(events.filter((event) => event.kind === "ModelReasoningDelta")).toHaveLength(1);
  });

  it("retries a rate_limit and a server_error fault as it would the provider's", async () => {
    const model = scriptedModel([
      { fault: "rate_limit", retryAfterMs: 5 },
      { fault: "server_error" },
      { text: "ok" },
    ]);
    const agent = await agentOn(model);

    await expect(agent.chat("hello")).resolves.toMatchObject({ result: "ok" });
    expect(model.requests).toHaveLength(3);
  });

  it("cuts the stream after the scripted deltas on disconnect_after, then the retry streams anew", async () => {
    const model = scriptedModel([
      { fault: "disconnect_after", deltas: ["Hel", "lo ", "world"], afterDeltas: 2 },
      { text: "Hello again" },
    ]);
    const events: AgentEvent[] = [];
    const agent = await agentOn(model, events);

    await expect(agent.chat("hello")).resolves.toMatchObject({ result: "Hello again" });
    const kinds = events
      .filter((event) => event.kind === "ModelTextDelta" || event.kind === "ModelStreamSegmentReset")
      .map((event) => (event.kind === "ModelTextDelta" ? event.delta : `reset: ${event.error.name}`));
    expect(kinds).toEqual(["Hel", "lo ", "reset: NetworkError", "Hello again"]);
  });

  it("fails the chat with the fault's error once the attempts are used up", async () => {
    const model = scriptedModel([{ fault: "server_error", message: "down" }, { fault: "server_error" }], {
      maxAttempts: 2,
    });
    const agent = await agentOn(model);

    const failure = await agent.chat("hello").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ChatFailedError);
    expect((failure as ChatFailedError).info.name).toBe("ServerError");
  });

  it("rejects an unknown fault when the script is written", () => {
    expect(() => scriptedModel([{ fault: "meltdown" as "rate_limit" }])).toThrow(InvalidRequestError);
    expect(() => scriptedModel([{ fault: "meltdown" as "rate_limit" }])).toThrow(/unknown fault "meltdown"/);
  });
});
