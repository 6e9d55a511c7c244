import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { NAME_PATTERN, sessionHeartbeatSubject } from "../../src/bus/subjects.js";
import type { RuntimeConfig } from "../../src/cli/cli-context.js";
import { loadAgentDefinitions } from "../../src/config/agent-definitions.js";
import { createHostToolSetRegistry } from "../../src/host/create-session-agent.js";
import { textOf } from "../../src/llm/types.js";
import type { ScriptedRequest, ScriptedStep } from "../../src/testing/index.js";
import { askAgentSession, createAskAgentToolSet } from "../../src/tools/ask-agent.js";
import { ToolError } from "../../src/tools/tool-errors.js";
import { type HostFixture, lastUserText, startHostFixture } from "../host/host-fixture.js";
import { createTestToolContext } from "./tool-context.js";

const config: RuntimeConfig = {
  provider: "demo",
  model: "demo",
  contextWindow: 128_000,
  natsUrl: "nats://127.0.0.1:4222",
  prefix: "agentloop",
};

/** The last tool result the model was given, or undefined before any tool ran. */
function lastToolResult(request: ScriptedRequest): string | undefined {
  const tool = request.messages.filter((message) => message.role === "tool").at(-1);
  return tool === undefined ? undefined : textOf(tool.content);
}

/**
 * A model that, asked `ask <agent>: <question>`, calls ask_agent once and then answers with what it
 * got back; anything else it answers `<name> answers: <text>`.
 */
function askingModel(name: string) {
  return (request: ScriptedRequest): ScriptedStep => {
    const toolResult = lastToolResult(request);
    const last = request.messages.at(-1);
    if (last?.role === "tool") return { text: `${name} got: ${toolResult}` };
    const text = lastUserText(request);
    const ask = /^ask (\w+): (.*)$/.exec(text);
    if (ask) return { toolCalls: [{ name: "ask_agent", arguments: { agent: ask[1], message: ask[2] } }] };
    return { text: `${name} answers: ${text}` };
  };
}

describe("ask_agent between two agents of an agents file", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  async function startTwoAgents(): Promise<HostFixture> {
    const directory = await mkdtemp(join(tmpdir(), "agentloop-agents-"));
    cleanups.push(() => rm(directory, { recursive: true, force: true }));
    const path = join(directory, "agents.json");
    await writeFile(
      path,
      JSON.stringify({
        agents: [
          { name: "bot", systemPrompt: "You delegate arithmetic.", tools: ["ask_agent"] },
          { name: "helper", tools: ["ask_agent", "current_time"] },
        ],
      }),
    );
    const definitions = await loadAgentDefinitions(path, config, {
      knownTools: createHostToolSetRegistry().names(),
    });
    const bus = new LocalBus();
    cleanups.push(() => bus.close());
    const fixture = await startHostFixture(bus, {
      definitions,
      scripts: { bot: askingModel("bot"), helper: askingModel("helper") },
    });
    cleanups.push(() => fixture.close());
    return fixture;
  }

  it("asks the other agent in a session derived from the caller's and returns its answer", async () => {
    const fixture = await startTwoAgents();
    const reply = await fixture.request("bot", "chat", {
      session: "s1",
      text: "ask helper: what is 6 times 7?",
    });
    expect(reply).toMatchObject({ ok: true, result: "bot got: helper answers: what is 6 times 7?" });
    const helperChats = fixture.events.filter(
      ({ subject, event }) =>
        subject.startsWith(`${fixture.prefix}.events.helper.`) && event.kind === "ChatCompleted",
    );
    expect(helperChats.map(({ subject }) => subject)).toEqual([
      `${fixture.prefix}.events.helper.bot-s1.ChatCompleted`,
    ]);
  });

  it("refuses to ask its own agent", async () => {
    const fixture = await startTwoAgents();
    const reply = await fixture.request("bot", "chat", { session: "s1", text: "ask bot: hello me" });
    expect(reply).toMatchObject({ ok: true });
    expect((reply as { result: string }).result).toMatch(/bot got: .*may not ask itself/);
    expect(fixture.backends.get("helper")?.requests ?? []).toHaveLength(0);
  });

  it("carries the nesting depth in the request and refuses past the cap", async () => {
    const fixture = await startTwoAgents();
    // bot at depth 2 may ask (2 < 3); helper then runs at depth 3 and may not ask further.
    const reply = await fixture.request("bot", "chat", {
      session: "s1",
      text: "ask helper: ask bot: are we there yet?",
      depth: 2,
    });
    expect((reply as { result: string }).result).toMatch(
      /^bot got: helper got: .*capped at depth 3 and this chat is at depth 3/,
    );
    const atCap = await fixture.request("bot", "chat", { session: "s2", text: "ask helper: hi", depth: 3 });
    expect((atCap as { result: string }).result).toMatch(/bot got: .*capped at depth 3/);
  });

  it("reports an agent nobody serves as a tool error the model sees", async () => {
    const fixture = await startTwoAgents();
    const reply = await fixture.request("bot", "chat", { session: "s1", text: "ask ghost: anyone?" });
    expect((reply as { result: string }).result).toMatch(/could not answer \(unknown_agent\)/);
  });
});

describe("createAskAgentToolSet", () => {
  it("turns a timeout into a tool error", async () => {
    const bus = new LocalBus();
    bus.subscribe("agentloop.agents.sleepy.chat", () => {
      // Never answers.
    });
    const toolSet = createAskAgentToolSet({ bus, timeoutMs: 30 });
    const call = {
      id: "c1",
      name: "ask_agent",
      arguments: JSON.stringify({ agent: "sleepy", message: "hi" }),
    };
    const context = createTestToolContext({ agent: "bot", session: "s1" });
    const timedOut = await toolSet.invoke(call, context).catch((error: unknown) => error);
    expect(timedOut).toBeInstanceOf(ToolError);
    expect((timedOut as ToolError).message).toBe('agent "sleepy" did not answer within 30 ms');
    await expect(
      toolSet.invoke({ ...call, arguments: JSON.stringify({ agent: "absent", message: "hi" }) }, context),
    ).rejects.toThrow('no host serves agent "absent"');
    await bus.close();
  });

  it("notices a host that dies while answering (its heartbeat stops) and says so in a tool error", async () => {
    // Ask_agent waited out its whole timeout (5 minutes) for a dead host.
    const bus = new LocalBus();
    bus.subscribe("agentloop.agents.helper.chat", (message) => {
      const { session } = JSON.parse(message.data) as { session: string };
      // The host took the question, beat once, and was killed.
      bus.publish(
        sessionHeartbeatSubject("agentloop", "helper", session),
        JSON.stringify({
          host: "h1",
          agent: "helper",
          session,
          ts: new Date().toISOString(),
          intervalMs: 10,
          requests: 1,
        }),
      );
    });
    const toolSet = createAskAgentToolSet({ bus, heartbeatTimeoutMs: 50 });
    const failure = await toolSet
      .invoke(
        { id: "c1", name: "ask_agent", arguments: JSON.stringify({ agent: "helper", message: "hi" }) },
        createTestToolContext({ agent: "bot", session: "s1" }),
      )
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ToolError);
    expect((failure as ToolError).message).toMatch(
      /^the host of agent "helper" stopped responding \(no heartbeat for \d+ ms\); it may have crashed$/,
    );
    await bus.close();
  });

  it("sends the derived session, the message and depth + 1", async () => {
    const bus = new LocalBus();
    const received: unknown[] = [];
    bus.subscribe("acme.agents.helper.chat", (message) => {
      received.push(JSON.parse(message.data));
      bus.respond(
        message,
        JSON.stringify({
          ok: true,
          session: "x",
          result: "fine",
          usage: { prompt: 0, completion: 0, total: 0, cached: 0 },
        }),
      );
    });
    const toolSet = createAskAgentToolSet({ bus, prefix: "acme", agent: "bot", peers: ["bot", "helper"] });
    expect(toolSet.tools()[0]?.description).toContain("Agents you can ask: helper.");
    const result = await toolSet.invoke(
      {
        id: "c1",
        name: "ask_agent",
        arguments: JSON.stringify({ agent: "helper", message: "how are you?" }),
      },
      createTestToolContext({ agent: "bot", session: "s9", depth: 1 }),
    );
    expect(result).toBe("fine");
    expect(received).toEqual([{ session: "bot-s9", text: "how are you?", depth: 2 }]);
    await bus.close();
  });

  it("derives valid, distinct session names even from long names", () => {
    const long = askAgentSession("a".repeat(64), "s".repeat(64));
    const other = askAgentSession("a".repeat(64), `${"s".repeat(63)}t`);
    expect(long).toMatch(NAME_PATTERN);
    expect(long).toHaveLength(64);
    expect(long).not.toBe(other);
    expect(askAgentSession("bot", "s1")).toBe("bot-s1");
  });
});
