import { afterEach, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import type { RuntimeConfig } from "../../src/cli/cli-context.js";
import { parseAgentDefinitions } from "../../src/config/agent-definitions.js";
import type { AgentEvent } from "../../src/events/types.js";
import { createHostToolSetRegistry } from "../../src/host/create-session-agent.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { InvalidRequestError } from "../../src/llm/errors.js";
import { textOf } from "../../src/llm/types.js";
import { ScriptedBackend, type ScriptedRequest, type ScriptedStep } from "../../src/testing/index.js";
import { createAskAgentToolSet } from "../../src/tools/ask-agent.js";
import { runToolCall } from "../../src/tools/tool-runner.js";
import { waitUntil } from "../support/agent-harness.js";
import { createTestToolContext } from "./tool-context.js";

/**
 * The `fail` supervision policy: when the agent a chat asked fails, the asking chat fails too,
 * its `ChatFailed` naming the asked agent's failure; a cycle or the depth cap stays a tool error.
 */

const buses: LocalBus[] = [];
const hosts: RunningHost[] = [];
afterEach(async () => {
  for (const host of hosts.splice(0)) await host.close();
  for (const bus of buses.splice(0)) await bus.close();
});

function newBus(): LocalBus {
  const bus = new LocalBus();
  buses.push(bus);
  return bus;
}

/** A `helper` answering every question with a failed reply of `code`. */
function failingHelper(code: string): { bus: LocalBus; asked: () => number } {
  const bus = newBus();
  let asked = 0;
  bus.subscribe("acme.agents.helper.chat", (message) => {
    asked++;
    bus.respond(message, JSON.stringify({ ok: false, error: { code, message: "the model is down" } }));
  });
  return { bus, asked: () => asked };
}

const config: RuntimeConfig = {
  provider: "openai-chat",
  model: "m",
  maxIterations: 5,
  contextWindow: 100_000,
  natsUrl: "nats://127.0.0.1:4222",
  prefix: "acme",
};

const call = { id: "k1", name: "ask_agent", arguments: JSON.stringify({ agent: "helper", message: "hi" }) };

describe("ask_agent under the fail policy", () => {
  it("turns a failed child into an error that fails the asking chat, naming the child", async () => {
    const { bus, asked } = failingHelper("llm_error");
    const toolSet = createAskAgentToolSet({
      bus,
      prefix: "acme",
      agent: "bot",
      supervision: { kind: "fail" },
    });
    const outcome = await runToolCall(
      call,
      [toolSet],
      createTestToolContext({ agent: "bot", session: "s1" }),
    );
    expect(outcome.ok).toBe(false);
    expect(outcome.failsChat).toBe(true);
    expect(outcome.error?.code).toBe("agent_failed");
    expect(outcome.error?.message).toContain("helper/bot-s1 failed (agent_failed");
    expect(outcome.error?.message).toContain("the model is down");
    expect(asked()).toBe(1);
  });

  it("keeps a cycle a tool error the model sees: asking again elsewhere may still work", async () => {
    const { bus } = failingHelper("cycle");
    const toolSet = createAskAgentToolSet({
      bus,
      prefix: "acme",
      agent: "bot",
      supervision: { kind: "fail" },
    });
    const outcome = await runToolCall(call, [toolSet], createTestToolContext({ agent: "bot" }));
    expect(outcome.failsChat).toBeUndefined();
    expect(JSON.parse(outcome.result)).toMatchObject({ code: "cycle" });
  });

  it("keeps the depth cap a tool error too", async () => {
    const { bus, asked } = failingHelper("llm_error");
    const toolSet = createAskAgentToolSet({
      bus,
      prefix: "acme",
      agent: "bot",
      maxDepth: 1,
      supervision: { kind: "fail" },
    });
    const outcome = await runToolCall(call, [toolSet], createTestToolContext({ agent: "bot", depth: 1 }));
    expect(outcome.failsChat).toBeUndefined();
    expect(JSON.parse(outcome.result)).toMatchObject({ code: "depth_exceeded" });
    expect(asked()).toBe(0);
  });

  it('reads onChildFailure: "fail" from the agents file and refuses an unknown policy', () => {
    const parse = (policy: string) =>
      parseAgentDefinitions(
        JSON.stringify({ agents: [{ name: "lead", onChildFailure: policy }] }),
        "agents.json",
        { ...config },
        { knownTools: createHostToolSetRegistry().names() },
      );
    expect(parse("fail")[0]?.supervision).toEqual({ kind: "fail" });
    expect(() => parse("panic")).toThrow(/agents\[0\]\.onChildFailure/);
  });
});

/** The last message's text, when it is a tool result. */
function toolResultOf(request: ScriptedRequest): string | undefined {
  const last = request.messages.at(-1);
  return last?.role === "tool" ? textOf(last.content) : undefined;
}

describe("a chat whose child fails under the fail policy", () => {
  it("fails with ChatFailed naming the child's failure; the model is not asked again", async () => {
    const bus = newBus();
    const events: AgentEvent[] = [];
    const lead = new ScriptedBackend((request): ScriptedStep => {
      const result = toolResultOf(request);
      if (result !== undefined) return { text: `the helper said ${result}` };
      return {
        toolCalls: [
          { name: "ask_agent", arguments: { agent: "helper", message: "do it" } },
          { name: "current_time", arguments: {} },
        ],
      };
    });
    const helper = new ScriptedBackend(() => ({
      error: new InvalidRequestError("the helper's model refused"),
    }));
    hosts.push(
      await startHost({
        bus,
        prefix: "acme",
        agents: [
          {
            name: "lead",
            tools: ["ask_agent", "current_time"],
            onChildFailure: "fail",
            backend: lead,
          },
          { name: "helper", backend: helper },
        ],
        onEvent: (event) => events.push(event),
      }),
    );
    const reply = JSON.parse(
      (await bus.request(chatSubject("acme", "lead"), JSON.stringify({ session: "s1", text: "go" }))).data,
    ) as { ok: boolean; error?: { code: string; message: string } };

    expect(reply.ok).toBe(false);
    expect(reply.error?.message).toContain("helper/lead-s1 failed");
    expect(reply.error?.message).toContain("the helper's model refused");
    // The model got the question once: the child's failure ended the chat, not a second turn.
    expect(lead.requests).toHaveLength(1);
    const failed = events.find((event) => event.kind === "ChatFailed" && event.agent === "lead");
    expect(failed).toMatchObject({ error: { code: "agent_failed" }, cancelled: false });
    // Every call the chat started is closed: the ask failed, the other one ended one way or another.
    const callsOf = (kinds: readonly AgentEvent["kind"][]) =>
      new Set(
        events
          .filter((event) => event.agent === "lead" && kinds.includes(event.kind))
          .map((event) => (event as { toolCallId: string }).toolCallId),
      );
    await waitUntil(
      () => callsOf(["ToolCallFailed", "ToolCallCompleted"]).size === callsOf(["ToolCallStarted"]).size,
      30_000,
    );
    expect(callsOf(["ToolCallFailed", "ToolCallCompleted"])).toEqual(callsOf(["ToolCallStarted"]));
  });

  it("under the default policy the model gets the failure and answers", async () => {
    const bus = newBus();
    const lead = new ScriptedBackend((request): ScriptedStep => {
      const result = toolResultOf(request);
      if (result !== undefined) return { text: "I will do it myself" };
      return { toolCalls: [{ name: "ask_agent", arguments: { agent: "helper", message: "do it" } }] };
    });
    const helper = new ScriptedBackend(() => ({
      error: new InvalidRequestError("the helper's model refused"),
    }));
    hosts.push(
      await startHost({
        bus,
        prefix: "acme",
        agents: [
          { name: "lead", tools: ["ask_agent"], backend: lead },
          { name: "helper", backend: helper },
        ],
      }),
    );
    const reply = JSON.parse(
      (await bus.request(chatSubject("acme", "lead"), JSON.stringify({ session: "s1", text: "go" }))).data,
    ) as { ok: boolean; result?: string };
    expect(reply).toMatchObject({ ok: true, result: "I will do it myself" });
    expect(lead.requests).toHaveLength(2);
  });
});
