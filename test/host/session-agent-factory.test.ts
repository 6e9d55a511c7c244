import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
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

describe("createSessionAgentFactory's hasSession (the Agent Protocol's status of a session never used)", () => {
  const definitions: ResolvedAgentDefinition[] = [
    { name: "writer", provider: "demo", model: "demo", tools: [], contextWindow: 128_000 },
  ];

  it("knows the sessions it built when histories live in memory", async () => {
    const bus = new LocalBus();
    const factory = createSessionAgentFactory({ definitions, bus, env: {} });
    expect(factory.hasSession("writer", "s1")).toBe(false);
    await factory.createAgent("writer", "s1", { post: () => {} });
    expect(factory.hasSession("writer", "s1")).toBe(true);
    expect(factory.hasSession("writer", "s2")).toBe(false);
    factory.close();
    await bus.close();
  });

  it("reads the SQLite file: a session with stored messages exists for a later process too", async () => {
    const directory = await mkdtemp(join(tmpdir(), "agentloop-has-session-"));
    const db = join(directory, "history.db");
    const bus = new LocalBus();
    try {
      const first = createSessionAgentFactory({ definitions, bus, env: {}, db });
      const agent = await first.createAgent("writer", "kept", { post: () => {} });
      await agent.chat("hello");
      first.close();
      const second = createSessionAgentFactory({ definitions, bus, env: {}, db });
      expect(second.hasSession("writer", "kept")).toBe(true);
      expect(second.hasSession("writer", "never")).toBe(false);
      second.close();
    } finally {
      await bus.close();
      await rm(directory, { recursive: true, force: true });
    }
  });
});
