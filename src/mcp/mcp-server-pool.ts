import { ConfigurationError } from "../errors/configuration-error.js";
import type { ToolSet } from "../tools/tool-set.js";
import { findMcpServerConflicts, type McpServerConfig, type McpServers } from "./mcp-server-config.js";
import { McpServerConnection, type McpServerConnectionOptions } from "./mcp-server-connection.js";
import { createMcpToolSet } from "./mcp-tool-set.js";

/** An agent and the MCP servers it lists. */
export interface AgentMcpServers {
  name: string;
  mcpServers?: McpServers;
}

export interface McpServerPoolOptions extends Omit<McpServerConnectionOptions, "name" | "config"> {}

/**
 * The host's MCP servers: one connection per server name, shared by every agent that lists it and
 * by all their sessions. Started with the host, closed with it.
 */
export class McpServerPool {
  readonly #connections = new Map<string, McpServerConnection>();
  readonly #toolSets = new Map<string, ToolSet>();
  readonly #serversOf = new Map<string, string[]>();

  /**
   * Builds (does not start) the connections the agents list.
   *
   * @throws ConfigurationError when two agents configure one server name differently.
   */
  constructor(agents: readonly AgentMcpServers[], options: McpServerPoolOptions = {}) {
    const [conflict] = findMcpServerConflicts(agents);
    if (conflict !== undefined) throw new ConfigurationError(conflict.message);
    const configs = new Map<string, McpServerConfig>();
    for (const agent of agents) {
      const servers = Object.entries(agent.mcpServers ?? {});
      this.#serversOf.set(
        agent.name,
        servers.map(([name]) => name),
      );
      for (const [name, config] of servers) if (!configs.has(name)) configs.set(name, config);
    }
    for (const [name, config] of configs) {
      const connection = new McpServerConnection({ ...options, name, config });
      this.#connections.set(name, connection);
      this.#toolSets.set(name, createMcpToolSet(connection));
    }
  }

  /** The server names, in the order agents list them. */
  get names(): string[] {
    return [...this.#connections.keys()];
  }

  connection(name: string): McpServerConnection | undefined {
    return this.#connections.get(name);
  }

  /** The ToolSets of the servers `agent` lists (none for an agent the pool does not know). */
  toolSetsFor(agent: string): ToolSet[] {
    return (this.#serversOf.get(agent) ?? []).flatMap((name) => this.#toolSets.get(name) ?? []);
  }

  /** Starts every server; resolves when each first attempt has settled (failures are retried). */
  async start(): Promise<void> {
    await Promise.all([...this.#connections.values()].map((connection) => connection.start()));
  }

  /** Stops every server (ends the stdio processes). */
  async close(): Promise<void> {
    await Promise.all([...this.#connections.values()].map((connection) => connection.close()));
  }
}
