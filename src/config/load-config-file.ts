import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ConfigurationError } from "../errors/configuration-error.js";
import { describeError } from "../errors/describe-error.js";
import { AgentloopConfig } from "./agent-config.js";
import {
  describeIssue,
  type ResolveAgentsOptions,
  type ResolvedAgentDefinition,
} from "./agent-definitions.js";
import { ConfigFileError } from "./config-file-error.js";
import { resolveAgentConfigs } from "./resolve-agent-configs.js";
import type { RuntimeConfig } from "./runtime-config.js";

/**
 * Loads `--config FILE`: an ES module whose default export is a configuration
 * (`export default defineConfig({ agents: [...] })`), imported as it is, so its tools run as
 * written. The agents are validated and completed from the CLI configuration like an agents
 * file's.
 *
 * @throws ConfigFileError naming the file, and the field when the configuration is wrong.
 */
export async function loadConfigFile(
  path: string,
  runtime: RuntimeConfig,
  options: ResolveAgentsOptions,
): Promise<ResolvedAgentDefinition[]> {
  const absolute = resolve(path);
  try {
    if (!(await stat(absolute)).isFile()) throw new ConfigFileError(path, "is not a file");
  } catch (error) {
    if (error instanceof ConfigFileError) throw error;
    const reason = (error as NodeJS.ErrnoException).code === "ENOENT" ? "no such file" : describeError(error);
    throw new ConfigFileError(path, `cannot be read (${reason})`, { cause: error });
  }
  let module: { default?: unknown };
  try {
    module = (await import(pathToFileURL(absolute).href)) as { default?: unknown };
  } catch (error) {
    // A syntax error, a missing import, or the file's own code throwing while it loads.
    throw new ConfigFileError(path, `cannot be loaded: ${describeError(error)}`, { cause: error });
  }
  if (module.default === undefined) {
    throw new ConfigFileError(path, "has no default export (export default defineConfig({ agents: [...] }))");
  }
  try {
    return parseConfig(module.default, runtime, options);
  } catch (error) {
    if (error instanceof ConfigurationError) throw new ConfigFileError(path, error.message, { cause: error });
    throw error;
  }
}

/**
 * Validates and resolves a configuration value (a config file's default export, or `startHost`'s
 * agents).
 *
 * @throws ConfigurationError whose message starts with the field: `agents[1].tools[0]: …`.
 */
export function parseConfig(
  value: unknown,
  runtime: RuntimeConfig,
  options: ResolveAgentsOptions,
): ResolvedAgentDefinition[] {
  const parsed = AgentloopConfig.safeParse(value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigurationError(issue === undefined ? "invalid" : describeIssue(issue), {
      cause: parsed.error,
    });
  }
  return resolveAgentConfigs(parsed.data, runtime, options);
}
