import type { RuntimeConfig } from "../config/runtime-config.js";

// The configuration's types live in src/config (the host reads them too); commands import them from here.
export type { RuntimeConfig } from "../config/runtime-config.js";
export { UsageError } from "../config/usage-error.js";

/** What every command receives. Commands resolve to an exit code; they never call process.exit. */
export interface CliContext {
  /** Positional arguments after the command name. */
  positionals: string[];
  /** Command-specific flags as parsed (`--port 8080` → { port: "8080" }, `--local` → { local: true }). */
  flags: Record<string, string | boolean | undefined>;
  config: RuntimeConfig;
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  /** Where answers to prompts come from (remote `chat`'s tool approvals). Absent: nothing is asked. */
  stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
  /** Aborted on SIGINT / SIGTERM: long-running commands drain and resolve. */
  signal: AbortSignal;
  /**
   * Aborted on the second SIGINT / SIGTERM: long-running commands stop draining, cancel what
   * runs (answering every waiting request `cancelled`, letting cancelled chats write their
   * history) and resolve. A third signal exits at once.
   */
  urgentSignal?: AbortSignal;
}

export type Command = (context: CliContext) => Promise<number>;
