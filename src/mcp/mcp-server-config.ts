import { z } from "zod";

/** A server's name: the `<server>` of its tools' `<server>__<tool>` names. */
export const MCP_SERVER_NAME = /^[A-Za-z0-9_-]+$/;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * An MCP server run as a child process, spoken to over its stdin and stdout. It sees only `env`
 * and the host's PATH, HOME and locale (never the host's API keys).
 */
export const McpStdioServerConfig = z
  .object({
    command: z.string().min(1),
    args: z.array(z.string()).optional(),
    env: z
      .record(z.string().regex(ENV_NAME, { error: "must be an environment variable name" }), z.string())
      .optional(),
    /** Working directory of the process; default the host's. */
    cwd: z.string().min(1).optional(),
  })
  .strict();
export type McpStdioServerConfig = z.infer<typeof McpStdioServerConfig>;

/** An MCP server reached over Streamable HTTP at `url` (`headers` go with every request). */
export const McpHttpServerConfig = z
  .object({
    url: z.url({ protocol: /^https?$/, error: "must be an http(s) URL" }),
    headers: z.record(z.string().min(1), z.string()).optional(),
  })
  .strict();
export type McpHttpServerConfig = z.infer<typeof McpHttpServerConfig>;

/** One server: `{ command, args?, env?, cwd? }` (stdio) or `{ url, headers? }` (Streamable HTTP). */
export const McpServerConfig = z.union([McpStdioServerConfig, McpHttpServerConfig], {
  error: "needs either command (a stdio server) or url (a Streamable HTTP server)",
});
export type McpServerConfig = z.infer<typeof McpServerConfig>;

/**
 * An agent's `mcpServers`: `{ "<name>": <server> }`. Agents that name the same server must
 * configure it the same way: the host runs one client per server and shares it.
 */
export const McpServers = z.record(z.string().regex(MCP_SERVER_NAME), McpServerConfig, {
  error: (issue) =>
    issue.code === "invalid_key" ? `server names must match ${MCP_SERVER_NAME.source}` : undefined,
});
export type McpServers = z.infer<typeof McpServers>;

/** True for a stdio server's configuration. */
export function isStdioServerConfig(config: McpServerConfig): config is McpStdioServerConfig {
  return "command" in config;
}

/** Two agents configuring one server name differently; `agentIndex` is the later one. */
export interface McpServerConflict {
  agentIndex: number;
  server: string;
  message: string;
}

/**
 * The server names that agents configure differently. The host runs one client per name, shared
 * by the agents that list it, so one name must mean one configuration (key order aside).
 */
export function findMcpServerConflicts(
  agents: ReadonlyArray<{ name: string; mcpServers?: McpServers | undefined }>,
): McpServerConflict[] {
  const first = new Map<string, { agent: string; json: string }>();
  const conflicts: McpServerConflict[] = [];
  agents.forEach((agent, agentIndex) => {
    for (const [server, config] of Object.entries(agent.mcpServers ?? {})) {
      const json = canonicalJson(config);
      const seen = first.get(server);
      if (seen === undefined) first.set(server, { agent: agent.name, json });
      else if (seen.json !== json) {
        conflicts.push({
          agentIndex,
          server,
          message: `agents "${seen.agent}" and "${agent.name}" configure MCP server "${server}" differently (one server name, one configuration: rename one of them)`,
        });
      }
    }
  });
  return conflicts;
}

/** JSON with object keys sorted, to compare two configurations regardless of key order. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) =>
    item !== null && typeof item === "object" && !Array.isArray(item)
      ? Object.fromEntries(Object.entries(item).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : item,
  );
}
