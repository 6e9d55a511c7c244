/** Environment variables as the process got them: what every `env` option defaults to. */
export type Environment = Record<string, string | undefined>;

/**
 * The one place agentloop reads `process.env`. Everything else is handed an environment (the CLI's
 * entry point passes this one down; `startHost`, `createBackend` and the other public entry points
 * default to it), so a test or an embedding application decides what the providers, the shell and
 * the MCP servers see: a key that is not in the environment given never reaches a server.
 */
export function processEnvironment(): Environment {
  return process.env;
}
