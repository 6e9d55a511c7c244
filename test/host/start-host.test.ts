import { describe, expect, it } from "vitest";
import { z } from "zod";
import { LocalBus } from "../../src/bus/local-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { startHost } from "../../src/host/start-host.js";
import { ConfigurationError } from "../../src/llm/configuration-error.js";
import { ScriptedBackend, scriptedModel } from "../../src/testing/index.js";
import { createToolSet } from "../../src/tools/create-tool-set.js";
import { defineTool } from "../../src/tools/define-tool.js";

/** `startHost`: the host as a library function, serving agents written in code on a bus. */

function counterToolSet() {
  return createToolSet({
    name: "counter",
    initialState: () => ({ count: 0 }),
    tools: (state) => [
      defineTool({
        name: "increment",
        description: "Adds one to this session's counter.",
        parameters: z.object({}),
        execute: () => String(++state.count),
      }),
    ],
  });
}

async function chat(bus: LocalBus, agent: string, session: string, text: string) {
  const reply = await bus.request(chatSubject("agentloop", agent), JSON.stringify({ session, text }));
  return JSON.parse(reply.data) as Record<string, unknown>;
}

describe("startHost", () => {
  it("takes a scriptedModel(...) as an agent's backend (it used to fail: sink.onCompleted is not a function)", async () => {
    const bus = new LocalBus();
    const model = scriptedModel([{ fault: "rate_limit" }, { deltas: ["Hel", "lo"] }]);
    const host = await startHost({ bus, agents: [{ name: "scripted", backend: model }] });
    expect(await chat(bus, "scripted", "s1", "hi")).toMatchObject({ ok: true, result: "Hello" });
    // The host's own retrying client retried the scripted fault, and the model recorded both requests.
    expect(model.requests).toHaveLength(2);
    await host.close();
  });

  it("serves agents with ToolSets and tools from code, one ToolSet state per session", async () => {
    const bus = new LocalBus();
    const events: AgentEvent[] = [];
    const echo = defineTool({
      name: "echo",
      description: "Echoes its text.",
      parameters: z.object({ text: z.string() }),
      execute: ({ text }) => text.toUpperCase(),
    });
    const backend = new ScriptedBackend((request) => {
      const last = request.messages.at(-1);
      if (last?.role === "tool") return { text: `tool said ${String(last.content)}` };
      return { toolCalls: [{ name: "increment" }, { name: "echo", arguments: { text: "hi" } }] };
    });
    const host = await startHost({
      bus,
      agents: [{ name: "counter", systemPrompt: "Count.", tools: [counterToolSet(), echo], backend }],
      onEvent: (event) => events.push(event),
    });
    expect(host.agents).toEqual(["counter"]);
    expect(await chat(bus, "counter", "s1", "go")).toMatchObject({ ok: true, result: "tool said HI" });
    await chat(bus, "counter", "s1", "again");
    await chat(bus, "counter", "s2", "go");
    const counts = events.flatMap((event) =>
      event.kind === "ToolCallCompleted" && event.toolName === "increment"
        ? [`${event.session}:${event.result}`]
        : [],
    );
    expect(counts).toEqual(["s1:1", "s1:2", "s2:1"]);
    expect(backend.requests[0]?.messages[0]?.content).toBe("Count.");
    await host.close();
    await bus.close();
  });

  it("refuses a bad agent with an error naming the field", async () => {
    const bus = new LocalBus();
    const attempt = startHost({
      bus,
      agents: [{ name: "a" }, { name: "b", tools: [{ nope: true } as never] }],
    });
    await expect(attempt).rejects.toThrow(ConfigurationError);
    await expect(attempt).rejects.toThrow(
      /^startHost: agents\[1\]\.tools\[0\]: must be a built-in tool set name, a ToolSet/,
    );
    await bus.close();
  });

  it.each([
    [{ leaseTtlMs: 100 }, "leaseTtlMs must be a whole number from 300 to 3600000, got 100"],
    [{ dedupeWindowMs: Number.NaN }, "dedupeWindowMs must be a whole number from 1000 to 604800000, got NaN"],
    [{ jsReplicas: 7 }, "jsReplicas must be a whole number from 1 to 5, got 7"],
  ])("refuses %j with one line before starting anything", async (settings, message) => {
    const bus = new LocalBus();
    const attempt = startHost({ bus, agents: [{ name: "a" }], ...settings });
    await expect(attempt).rejects.toThrow(ConfigurationError);
    await expect(attempt).rejects.toThrow(`startHost: ${message}`);
    await bus.close();
  });
});
