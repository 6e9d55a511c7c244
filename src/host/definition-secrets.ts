import type { ResolvedAgentDefinition } from "../config/agent-definitions.js";
import { isStdioServerConfig } from "../mcp/mcp-server-config.js";

/**
 * The secrets the agents' own settings hand out, to be hidden like the host's keys: the values of
 * the variables an agent passes to its `shell` commands (`shellEnv`: a deploy token, say), and
 * the values of its MCP servers' `env` and `headers` (an `Authorization` header's credentials
 * also on their own, without the scheme, since a server's error may quote just the token). A
 * value shorter than the redactor's minimum is left alone by the redactor.
 */
export function definitionSecrets(
  definitions: readonly Pick<ResolvedAgentDefinition, "shellEnv" | "mcpServers">[],
  env: Readonly<Record<string, string | undefined>>,
): string[] {
  const secrets = new Set<string>();
  const add = (value: string | undefined) => {
    const trimmed = value?.trim();
    if (trimmed !== undefined && trimmed !== "") secrets.add(trimmed);
  };
  for (const definition of definitions) {
    for (const name of definition.shellEnv ?? []) add(env[name]);
    for (const server of Object.values(definition.mcpServers ?? {})) {
      if (isStdioServerConfig(server)) {
        for (const value of Object.values(server.env ?? {})) add(value);
        continue;
      }
      for (const value of Object.values(server.headers ?? {})) {
        add(value);
        // "Bearer <token>", "Basic <credentials>": the credentials alone too.
        const credentials = /^[A-Za-z][A-Za-z0-9-]*\s+(\S+)$/.exec(value.trim())?.[1];
        add(credentials);
      }
    }
  }
  return [...secrets];
}
