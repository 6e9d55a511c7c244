import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { ChatFailedError } from "../../src/agent/chat-errors.js";
import { createAgent } from "../../src/agent/create-agent.js";
import type { AgentEvent } from "../../src/events/types.js";
import { createBackend } from "../../src/llm/create-backend.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import {
  type FakeProvider,
  type FakeProviderKind,
  type FakeProviderScript,
  startFakeProvider,
} from "../../src/testing/index.js";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool } from "../../src/tools/define-tool.js";

const KINDS: FakeProviderKind[] = ["anthropic", "openai-chat", "openai-responses"];

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

let provider: FakeProvider | undefined;
afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

/** An agent on the real SDK backend for `kind`, configured from the fake's environment alone. */
async function agentOn(kind: FakeProviderKind, script: FakeProviderScript, events: AgentEvent[] = []) {
  provider = await startFakeProvider(kind, { script });
  const backend = createBackend({ provider: kind }, provider.env);
  const llm = new RetryingLlmClient({ backend, sleep: async () => {} });
  const agent = await createAgent({
    llm,
    model: kind === "anthropic" ? "claude-haiku-4-5" : "gpt-4.1-mini",
    toolSets: [echo],
    options: { onLog: (event) => events.push(event) },
  });
  return { agent, backend, provider };
}

describe.each(KINDS)("startFakeProvider(%s)", (kind) => {
  it("serves a tool turn and a final answer to the real SDK, streaming, and records the bodies", async () => {
    const events: AgentEvent[] = [];
    const { agent, provider } = await agentOn(
      kind,
      [{ toolCalls: [{ name: "echo", arguments: { text: "hi" } }] }, { deltas: ["It said ", "hi."] }],
      events,
    );

    const { result } = await agent.chat("say hi");

    expect(result).toBe("It said hi.");
    const bodies = provider.bodies();
    expect(bodies).toHaveLength(2);
    expect(bodies[0]?.stream).toBe(true);
    expect(JSON.stringify(bodies[1])).toContain("echo: hi");
    expect(JSON.stringify(bodies[1])).toContain("call_1_1");
    const deltas = events.flatMap((event) => (event.kind === "ModelTextDelta" ? [event.delta] : []));
    expect(deltas).toEqual(["It said ", "hi."]);
  });

  it("streams reasoning before the text", async () => {
    const events: AgentEvent[] = [];
    const { agent } = await agentOn(kind, [{ reasoningDeltas: ["Think", "ing."], text: "Done." }], events);

    await expect(agent.chat("think")).resolves.toMatchObject({ result: "Done." });
    const reasoning = events.flatMap((event) => (event.kind === "ModelReasoningDelta" ? [event.delta] : []));
    expect(reasoning.join("")).toBe("Thinking.");
  });

  it("answers a rate_limit fault with a 429 the client retries", async () => {
    const { agent, provider } = await agentOn(kind, [
      { fault: "rate_limit", retryAfterMs: 1 },
      { text: "ok" },
    ]);

    await expect(agent.chat("hello")).resolves.toMatchObject({ result: "ok" });
    expect(provider.bodies()).toHaveLength(2);
  });

  it("cuts the stream after the scripted deltas on disconnect_after", async () => {
    const events: AgentEvent[] = [];
    const { agent } = await agentOn(
      kind,
      [{ fault: "disconnect_after", deltas: ["Hel", "lo"], afterDeltas: 1 }, { text: "Hello again" }],
      events,
    );

    await expect(agent.chat("hello")).resolves.toMatchObject({ result: "Hello again" });
    const seen = events.flatMap((event) =>
      event.kind === "ModelTextDelta"
        ? [event.delta]
        : event.kind === "ModelStreamSegmentReset"
          ? [`reset: ${event.error.name}`]
          : [],
    );
    expect(seen).toEqual(["Hel", "reset: NetworkError", "Hello again"]);
  });

  it("fails the chat when server_error faults outlast the attempts", async () => {
    const { agent } = await agentOn(kind, [
      { fault: "server_error" },
      { fault: "server_error" },
      { fault: "server_error" },
    ]);

    const failure = await agent.chat("hello").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ChatFailedError);
    expect((failure as ChatFailedError).info.name).toBe("ServerError");
  });

  it("answers a non-streaming request with a JSON body", async () => {
    const { backend } = await agentOn(kind, [
      { text: "Plain.", toolCalls: [{ id: "call_a", name: "echo", arguments: '{"text":"x"}' }] },
    ]);

    const response = await backend.generate({
      messages: [{ role: "user", content: "hi" }],
      options: { model: kind === "anthropic" ? "claude-haiku-4-5" : "gpt-4.1-mini" },
    });

    expect(response.content).toBe("Plain.");
    expect(response.toolCalls).toEqual([{ id: "call_a", name: "echo", arguments: '{"text":"x"}' }]);
  });

  it("fails loudly when the test asks for more replies than scripted", async () => {
    const { agent, provider } = await agentOn(kind, [{ text: "only one" }]);
    await agent.chat("one");

    const failure = await agent.chat("two").catch((error: unknown) => error);
    // A 500, so the client retries it like any: the third attempt is request 4.
    expect((failure as ChatFailedError).message).toMatch(/no reply scripted for request 4/);
    expect(provider.bodies()).toHaveLength(4);
  });
});

describe("startFakeProvider", () => {
  it("rejects an unknown provider and a step without a wire form", async () => {
    await expect(startFakeProvider("gemini" as FakeProviderKind, { script: [] })).rejects.toThrow(
      /unknown provider "gemini"/,
    );
    await expect(
      startFakeProvider("anthropic", { script: [{ error: new Error("x") } as never] }),
    ).rejects.toThrow(/no wire form/);
  });
});
