import { describe, expect, it } from "vitest";
import type { RuntimeConfig } from "../../src/cli/cli-context.js";
import { AgentDefinitionsError, parseAgentDefinitions } from "../../src/config/agent-definitions.js";
import { createHostToolSetRegistry } from "../../src/host/create-session-agent.js";
import { McpServerPool } from "../../src/mcp/mcp-server-pool.js";

/** `mcpServers` in an agents file: what is read, and what is refused with a clear reason. */

const config: RuntimeConfig = {
  provider: "openai-chat",
  model: "gpt-4o",
  contextWindow: 128_000,
  natsUrl: "nats://127.0.0.1:4222",
  prefix: "agentloop",
};
const knownTools = createHostToolSetRegistry().names();

function parse(value: unknown) {
  return parseAgentDefinitions(JSON.stringify(value), "agents.json", config, { knownTools });
}

function refusal(agents: unknown[]): string {
  try {
    parse({ agents });
  } catch (error) {
    expect(error).toBeInstanceOf(AgentDefinitionsError);
    return (error as Error).message;
  }
  throw new Error("expected the file to be refused");
}

describe("mcpServers in the agents file", () => {
  it("reads stdio and Streamable HTTP servers into the resolved definition", () => {
    const mcpServers = {
      files: {
        command: "npx",
        args: ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
        env: { A: "1" },
      },
      web: { url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer x" } },
    };
    const [agent] = parse({ agents: [{ name: "bot", mcpServers }] });
    expect(agent?.mcpServers).toEqual(mcpServers);
    // Without mcpServers the definition has none (nothing is started).
    expect(parse({ agents: [{ name: "bot" }] })[0]).not.toHaveProperty("mcpServers");
  });

  it("refuses bad server entries naming the field", () => {
    expect(refusal([{ name: "bot", mcpServers: { "my server": { command: "x" } } }])).toMatch(
      /^agents file agents\.json: agents\[0\]\.mcpServers\.my server: server names must match/,
    );
    expect(refusal([{ name: "bot", mcpServers: { s: {} } }])).toBe(
      "agents file agents.json: agents[0].mcpServers.s: needs either command (a stdio server) or url (a Streamable HTTP server)",
    );
    expect(refusal([{ name: "bot", mcpServers: { s: { url: "ftp://host/mcp" } } }])).toContain(
      "agents[0].mcpServers.s",
    );
    expect(
      refusal([{ name: "bot", mcpServers: { s: { command: "x", env: { "NOT-A-NAME": "1" } } } }]),
    ).toContain("agents[0].mcpServers.s");
  });

  it("shares one server between agents only when they configure it the same way", () => {
    const server = { command: "server", args: ["a"] };
    const agents = parse({
      agents: [
        { name: "one", mcpServers: { s: server } },
        { name: "two", mcpServers: { s: { args: ["a"], command: "server" } } },
      ],
    });
    const pool = new McpServerPool(agents);
    expect(pool.names).toEqual(["s"]);
    expect(pool.toolSetsFor("one")).toEqual(pool.toolSetsFor("two"));
    expect(pool.toolSetsFor("nobody")).toEqual([]);

    expect(
      refusal([
        { name: "one", mcpServers: { s: server } },
        { name: "two", mcpServers: { s: { command: "server", args: ["b"] } } },
      ]),
    ).toBe(
      'agents file agents.json: agents[1].mcpServers.s: agents "one" and "two" configure MCP server "s" differently (one server name, one configuration: rename one of them)',
    );
  });
});
