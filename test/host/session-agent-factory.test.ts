import { describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import type { ResolvedAgentDefinition } from "../../src/config/agent-definitions.js";
import { createSessionAgentFactory } from "../../src/host/create-session-agent.js";
import { ConfigurationError } from "../../src/llm/configuration-error.js";

describe("createSessionAgentFactory with an agent whose provider cannot be built", () => {
  it("throws a ConfigurationError that names the agent (it said only which key was missing)", async () => {
    const bus = new LocalBus();
    const definitions: ResolvedAgentDefinition[] = [
      { name: "writer", provider: "demo", model: "demo", tools: [], contextWindow: 128_000 },
      {
        name: "researcher",
        provider: "anthropic",
        model: "claude-sonnet-4-5",
        tools: [],
        contextWindow: 200_000,
      },
    ];
    let thrown: unknown;
    try {
      createSessionAgentFactory({ definitions, bus, env: {} });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigurationError);
    expect((thrown as Error).message).toMatch(/^agent "researcher": provider anthropic needs an API key/);
    await bus.close();
  });
});

describe("createSessionAgentFactory's lost events", () => {
  it("counts every event the bus could not take in one count and logs only the first", async () => {
    const bus = new LocalBus();
    await bus.close();
    const lines: string[] = [];
    const factory = createSessionAgentFactory({
      definitions: [{ name: "writer", provider: "demo", model: "demo", tools: [], contextWindow: 128_000 }],
      bus,
      env: {},
      log: (line) => lines.push(line),
    });
    const agent = await factory.createAgent("writer", "s1", { post: () => {} });
    await agent.chat("hello");
    expect(factory.eventPublishFailures).toBeGreaterThan(1);
    expect(factory.eventPublishFailures).toBe(bus.droppedPublishes);
    expect(lines).toEqual([
      "could not publish a ChatStarted event of writer/s1: the bus dropped the event; further lost events are counted in $SRV.STATS (eventPublishFailures)",
    ]);
    factory.close();
  });
});
