import { AgentloopError } from "../errors/agentloop-error.js";
import type { ProviderName } from "../llm/create-backend.js";
import type { ReasoningEffort } from "../llm/types.js";

/** Provider settings and shared flags, resolved from flags, then env, then defaults (SPEC §12). */
export interface RuntimeConfig {
  provider: ProviderName;
  /** Model name; the provider's default when unset. */
  model: string;
  baseUrl?: string;
  apiKey?: string;
  maxIterations?: number;
  reasoningEffort?: ReasoningEffort;
  /** Token limit the compaction ratio is measured against. */
  contextWindow: number;
  /** `--stream-idle-timeout` / `AGENTLOOP_STREAM_IDLE_TIMEOUT`; undefined = the backends' default (120 s). */
  streamIdleTimeoutMs?: number;
  /** NATS URL (flag --nats, env NATS_URL, default nats://127.0.0.1:4222). */
  natsUrl: string;
  natsCreds?: string;
  /** SQLite file (flag --db, env AGENTLOOP_DB); undefined = in memory. */
  db?: string;
  /** Subject prefix (flag --prefix, env AGENTLOOP_PREFIX, default "agentloop"). */
  prefix: string;
}

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

/** A user's mistake on the command line: printed as one line, exit code 2. */
export class UsageError extends AgentloopError {
  readonly code = "usage";
  readonly retryable = false;
}

export type Command = (context: CliContext) => Promise<number>;
