import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { QUERY_REFUSAL } from "../../src/protocol/agent-client.js";
import { createAskAgentToolSet } from "../../src/tools/ask-agent.js";
import { ToolCancelledError, ToolError } from "../../src/tools/tool-errors.js";
import { runToolCall, TOOL_RESULT_LIMIT } from "../../src/tools/tool-runner.js";
import { type FakeProtocolAgent, startFakeProtocolAgent } from "../protocol/fake-protocol-agent.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { createTestToolContext } from "./tool-context.js";

function call(args: Record<string, unknown>) {
  return { id: "c1", name: "ask_agent", arguments: JSON.stringify(args) };
}

describe("ask_agent with a protocol target", () => {
  let server: NatsServer;
  let bus: NatsBus;
  let fake: FakeProtocolAgent;
  let owner: string;

  beforeAll(async () => {
    server = await workerNatsServer();
    bus = await NatsBus.connect({ url: server.url });
  });
  afterAll(async () => {
    await bus.close();
    await server.stop();
  });
  afterEach(async () => {
    await fake.close();
  });

  async function startAgent(): Promise<FakeProtocolAgent> {
    owner = `o-${randomUUID().slice(0, 8)}`;
    fake = await startFakeProtocolAgent({ url: server.url, agent: "otherbot", owner, name: "s1" });
    return fake;
  }

  it("calls the agent found by discovery and returns its streamed text joined", async () => {
    await startAgent();
    const toolSet = createAskAgentToolSet({ bus, agent: "bot" });
    const result = await toolSet.invoke(
      call({ target: { agent: "otherbot", owner, name: "s1" }, message: "what is 6 times 7?" }),
      createTestToolContext({ agent: "bot" }),
    );
    expect(result).toBe("echo: what is 6 times 7? (done)");
    expect(fake.prompts).toEqual(["what is 6 times 7?"]);
  });

  it("turns the agent's error reply into a tool error with its code and description", async () => {
    await startAgent();
    const toolSet = createAskAgentToolSet({ bus, agent: "bot" });
    const failure = await toolSet
      .invoke(call({ target: { owner }, message: "error: 500 the model exploded" }), createTestToolContext())
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ToolError);
    expect((failure as ToolError).message).toBe("the agent could not answer (500): the model exploded");
  });

  it("follows the agent's supervision policy: retries a failing protocol agent, or fails the asking chat", async () => {
    await startAgent();
    const retrying = createAskAgentToolSet({
      bus,
      agent: "bot",
      supervision: { kind: "retry", times: 2, backoffMs: 1 },
    });
    const failure = await retrying
      .invoke(call({ target: { owner }, message: "error: 500 the model exploded" }), createTestToolContext())
      .catch((error: unknown) => error);
    expect(failure).toMatchObject({ code: "agent_failed", failsChat: false });
    // The first question and two retries.
    expect(fake.prompts).toHaveLength(3);

    const failing = createAskAgentToolSet({ bus, agent: "bot", supervision: { kind: "fail" } });
    const fatal = await failing
      .invoke(call({ target: { owner }, message: "error: 500 the model exploded" }), createTestToolContext())
      .catch((error: unknown) => error);
    expect(fatal).toMatchObject({ code: "agent_failed", failsChat: true });
    expect((fatal as Error).message).toContain(`the asked agent the protocol agent (owner ${owner}) failed`);
    expect(fake.prompts).toHaveLength(4);
  });

  it("refuses the agent's question (no human to ask) and returns what it answers then", async () => {
    await startAgent();
    const toolSet = createAskAgentToolSet({ bus, agent: "bot" });
    const result = await toolSet.invoke(
      call({ target: { owner }, message: "ask me" }),
      createTestToolContext(),
    );
    expect(result).toBe(`you said: ${QUERY_REFUSAL}`);
  });

  it("is cancelled by the chat's signal and stops listening to the stream", async () => {
    await startAgent();
    const toolSet = createAskAgentToolSet({ bus, agent: "bot" });
    const controller = new AbortController();
    const invocation = toolSet
      .invoke(
        call({ target: { owner }, message: "hang" }),
        createTestToolContext({ signal: controller.signal }),
      )
      .catch((error: unknown) => error);
    await waitFor(() => fake.prompts.length === 1);
    controller.abort();
    expect(await invocation).toBeInstanceOf(ToolCancelledError);
    // The fake agent's keep-alives find no listener any more: the caller unsubscribed.
    await fake.interestLost;
  });

  it("cuts a long answer to the tool result limit with the marker", async () => {
    await startAgent();
    const toolSet = createAskAgentToolSet({ bus, agent: "bot" });
    const outcome = await runToolCall(
      call({ target: { owner }, message: "x".repeat(TOOL_RESULT_LIMIT + 1_000) }),
      [toolSet],
      createTestToolContext(),
    );
    expect(outcome.ok).toBe(true);
    expect(outcome.result.length).toBeLessThanOrEqual(TOOL_RESULT_LIMIT);
    expect(outcome.result).toMatch(/^echo: x+\n…\[truncated: 9,013 characters, showing the first [\d,]+\]$/);
  });

  it("names the agents it found when the target matches none", async () => {
    await startAgent();
    const toolSet = createAskAgentToolSet({ bus, agent: "bot", protocol: { discoveryWindowMs: 1_000 } });
    await expect(
      toolSet.invoke(call({ target: { owner, name: "nobody" }, message: "hi" }), createTestToolContext()),
    ).rejects.toThrow(
      new RegExp(`no protocol agent matches owner=${owner} name=nobody \\(found: .*otherbot/${owner}/s1`),
    );
  });
});

describe("ask_agent's target, without a server", () => {
  it("explains that protocol agents need NATS when the host runs on the in-process bus", async () => {
    const bus = new LocalBus();
    const toolSet = createAskAgentToolSet({ bus, agent: "bot" });
    await expect(
      toolSet.invoke(call({ target: { agent: "x" }, message: "hi" }), createTestToolContext()),
    ).rejects.toThrow("protocol agents (target) are reachable over NATS only");
    await bus.close();
  });

  it("wants exactly one of agent and target, valid tokens, and keeps the depth cap", async () => {
    const bus = new LocalBus();
    const toolSet = createAskAgentToolSet({ bus, agent: "bot" });
    const context = createTestToolContext();
    await expect(
      toolSet.invoke(call({ agent: "helper", target: { agent: "x" }, message: "hi" }), context),
    ).rejects.toThrow("not both");
    await expect(toolSet.invoke(call({ message: "hi" }), context)).rejects.toThrow(
      "give agent (an agent of this system) or target (a protocol agent)",
    );
    await expect(toolSet.invoke(call({ target: { owner: "a.b" }, message: "hi" }), context)).rejects.toThrow(
      "one subject token",
    );
    await expect(
      toolSet.invoke(call({ target: { agent: "x" }, message: "hi" }), createTestToolContext({ depth: 3 })),
    ).rejects.toThrow("capped at depth 3");
    const parameters = toolSet.tools()[0]?.parameters as {
      required?: string[];
      properties: Record<string, unknown>;
    };
    expect(parameters.required).toEqual(["message"]);
    expect(Object.keys(parameters.properties)).toEqual(["agent", "target", "message"]);
    await bus.close();
  });
});
