import { execFile } from "node:child_process";
import { stat } from "node:fs/promises";
import { createRequire } from "node:module";
import { extname, resolve } from "node:path";
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
  const isTypeScript = TYPESCRIPT_EXTENSIONS.has(extname(absolute).toLowerCase());
  let module: { default?: unknown };
  try {
    module = (
      isTypeScript ? await importTypeScript(path, absolute) : await import(pathToFileURL(absolute).href)
    ) as { default?: unknown };
  } catch (error) {
    if (error instanceof ConfigFileError) throw error;
    // A syntax error, a missing import, or the file's own code throwing while it loads.
    const syntax = isTypeScript ? undefined : await checkSyntax(absolute);
    const reason = syntax ?? describeError(error);
    throw new ConfigFileError(path, `cannot be loaded: ${reason}`, { cause: error });
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

const TYPESCRIPT_EXTENSIONS = new Set([".ts", ".mts", ".cts"]);

/** What `tsx/esm/api` offers (tsx 4): importing one file through its loader, without registering it globally. */
interface TsxApi {
  tsImport(specifier: string, parentURL: string): Promise<unknown>;
}

/**
 * A TypeScript config, imported through `tsx` (from the config's own project, else next to
 * agentloop) when it is installed; else refused in one line saying what to do. Node itself runs
 * no TypeScript here (type stripping is not in every supported Node line, and not on by default).
 */
async function importTypeScript(path: string, absolute: string): Promise<unknown> {
  let apiPath: string | undefined;
  for (const base of [absolute, import.meta.url]) {
    try {
      apiPath = createRequire(base).resolve("tsx/esm/api");
      break;
    } catch {
      // Not installed there.
    }
  }
  if (apiPath === undefined) {
    throw new ConfigFileError(
      path,
      "is TypeScript, which needs tsx to load: install it (npm install --save-dev tsx) or compile the file to .js",
    );
  }
  const api = (await import(pathToFileURL(apiPath).href)) as Partial<TsxApi>;
  if (typeof api.tsImport !== "function") {
    throw new ConfigFileError(
      path,
      "is TypeScript, and the installed tsx is too old to load it (tsx 4 or later)",
    );
  }
  return api.tsImport(pathToFileURL(absolute).href, import.meta.url);
}

/**
 * A JavaScript syntax error with its line and column (`Unexpected token ']' (line 4, column 4)`),
 * or undefined when the file parses. An `import()` that fails to parse says what, not where, so
 * Node checks the file on its own (`node --check`): its report starts with `<file>:<line>`, then
 * the line, a caret under the column, and the `SyntaxError: …` line.
 */
function checkSyntax(absolute: string): Promise<string | undefined> {
  return new Promise((done) => {
    execFile(process.execPath, ["--check", absolute], { timeout: 10_000 }, (error, _stdout, stderr) => {
      if (error === null) return done(undefined);
      const lines = String(stderr).split("\n");
      const message = lines.find((line) => line.startsWith("SyntaxError: "))?.slice("SyntaxError: ".length);
      if (message === undefined) return done(undefined);
      const header = lines.findIndex((line) => line.startsWith(`${absolute}:`));
      const lineNumber = header === -1 ? undefined : /:(\d+)$/.exec(lines[header]!)?.[1];
      if (lineNumber === undefined) return done(message);
      const caret = lines[header + 2]?.indexOf("^") ?? -1;
      done(`${message} (line ${lineNumber}${caret === -1 ? "" : `, column ${caret + 1}`})`);
    });
  });
}
