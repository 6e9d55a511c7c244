import { stat } from "node:fs/promises";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError, type Tool as SdkTool } from "@modelcontextprotocol/sdk/types.js";
import { ConfigurationError } from "../errors/configuration-error.js";
import { SHELL_BASE_ENV } from "../tools/shell.js";
import { McpServerNotRunningError, McpToolCallError } from "./mcp-errors.js";
import { isStdioServerConfig, type McpServerConfig } from "./mcp-server-config.js";
import type { McpCallResult } from "./mcp-tool-result.js";

/** First restart delay; each failure in a row doubles it up to {@link DEFAULT_MAX_RESTART_DELAY_MS}. */
export const DEFAULT_INITIAL_RESTART_DELAY_MS = 500;
export const DEFAULT_MAX_RESTART_DELAY_MS = 30_000;
/** How long starting (initialize and the tool list) may take before the attempt counts as failed. */
export const DEFAULT_START_TIMEOUT_MS = 30_000;
/** A call's limit without progress notifications (each one restarts the clock). */
export const DEFAULT_CALL_TIMEOUT_MS = 120_000;

const CLIENT_INFO = { name: "agentloop", version: "0.1.0" };
const STDERR_TAIL_CHARS = 300;

/** A tool as the server describes it (its own name, not yet namespaced). */
export interface McpTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** The server's `idempotentHint` annotation (a hint: false when absent). */
  idempotent: boolean;
}

/**
 * `starting`: an attempt to connect is under way; `running`: connected, tools listed; `waiting`:
 * down, a restart is scheduled; `closed`: stopped with the host.
 */
export type McpConnectionState = "starting" | "running" | "waiting" | "closed";

export interface McpServerConnectionOptions {
  name: string;
  config: McpServerConfig;
  /** The host's environment: a stdio server gets only its PATH, HOME and locale from it. Default: none. */
  env?: NodeJS.ProcessEnv;
  /** One-line notices for the operator (a server that cannot start, stops, or is back). */
  log?: (line: string) => void;
  initialRestartDelayMs?: number;
  maxRestartDelayMs?: number;
  /** A server up this long before it stops restarts with the first delay again; default the max delay. */
  stableAfterMs?: number;
  startTimeoutMs?: number;
  callTimeoutMs?: number;
  /** Schedules a restart; returns a canceller. Injected by tests to see the delays. */
  schedule?: (run: () => void, delayMs: number) => () => void;
  now?: () => number;
}

/**
 * One MCP server of the host, through the official SDK client: starts it, lists its tools, calls
 * them, and restarts it with exponential backoff when it dies or cannot start. It never throws at
 * the host: a failed start is logged and retried, and a call while the server is down fails with a
 * {@link McpServerNotRunningError} the model reads as a tool error.
 */
export class McpServerConnection {
  readonly name: string;
  readonly #options: McpServerConnectionOptions;
  #state: McpConnectionState = "waiting";
  #reason = "not started yet";
  #tools: McpTool[] = [];
  #client: Client | undefined;
  /** The client of the attempt under way, so closing the host need not wait for a slow start. */
  #startingClient: Client | undefined;
  #attempt: Promise<void> | undefined;
  #cancelRestart: (() => void) | undefined;
  #failures = 0;
  #connectedAt: number | undefined;
  #loggedReason: string | undefined;
  #pid: number | undefined;
  #listeners = new Set<() => void>();

  constructor(options: McpServerConnectionOptions) {
    this.name = options.name;
    this.#options = options;
  }

  get state(): McpConnectionState {
    return this.#state;
  }

  /** Why the server is not running ("" while it runs). */
  get reason(): string {
    return this.#state === "running" ? "" : this.#reason;
  }

  /** The server's tools as last listed; kept while it is down so calls get a clear error. */
  get tools(): readonly McpTool[] {
    return this.#tools;
  }

  /** The stdio server's process id while it runs. */
  get pid(): number | undefined {
    return this.#pid;
  }

  /** Calls `listener` on every change of state or tools; returns the unsubscriber. */
  subscribe(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /**
   * Makes the first attempt and resolves when it has settled, whatever its outcome (a failure is
   * logged and a restart scheduled), so the host starts with the tools of the servers that work.
   */
  start(): Promise<void> {
    if (this.#state === "closed" || this.#attempt !== undefined) return this.#attempt ?? Promise.resolve();
    return this.#connect();
  }

  /**
   * Calls the server's tool `tool` (its own name). Waits for an attempt under way; throws
   * {@link McpServerNotRunningError} when the server is down and {@link McpToolCallError} when it
   * answered with a protocol error. The tool's own errors come back as a result with `isError`.
   */
  async callTool(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<McpCallResult> {
    if (this.#state === "starting" && this.#attempt !== undefined)
      await untilSettledOrAborted(this.#attempt, signal);
    signal.throwIfAborted();
    const client = this.#client;
    if (this.#state !== "running" || client === undefined) {
      throw new McpServerNotRunningError(this.name, this.#reason, { toolName: tool });
    }
    try {
      return (await client.callTool({ name: tool, arguments: args }, undefined, {
        signal,
        timeout: this.#options.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS,
        resetTimeoutOnProgress: true,
      })) as McpCallResult;
    } catch (error) {
      if (signal.aborted) throw error;
      if (error instanceof McpError && error.code !== ErrorCode.ConnectionClosed) {
        throw new McpToolCallError(this.name, `MCP server ${this.name}: ${error.message}`, {
          toolName: tool,
          cause: error,
        });
      }
      // The connection broke under the call (the process died, the HTTP server went away).
      if (this.#client === client) this.#lost(`the connection failed (${describeError(error)})`);
      throw new McpServerNotRunningError(this.name, this.#reason, { toolName: tool, cause: error });
    }
  }

  /** Stops the server for good: cancels a pending restart, closes the client, ends the process. */
  async close(): Promise<void> {
    if (this.#state === "closed") return;
    this.#setState("closed", "the host is shutting down");
    this.#cancelRestart?.();
    this.#cancelRestart = undefined;
    const client = this.#client;
    this.#client = undefined;
    this.#pid = undefined;
    await Promise.all([
      client === undefined ? undefined : closeClient(client),
      this.#startingClient === undefined ? undefined : closeClient(this.#startingClient),
      this.#attempt,
    ]);
  }

  async #connect(): Promise<void> {
    this.#setState("starting", "it is starting");
    const attempt = this.#attemptConnect();
    this.#attempt = attempt;
    try {
      await attempt;
    } finally {
      if (this.#attempt === attempt) this.#attempt = undefined;
    }
  }

  async #attemptConnect(): Promise<void> {
    const stderr = { tail: "" };
    let isClosed = false;
    const client = new Client(CLIENT_INFO, {
      listChanged: {
        tools: {
          onChanged: (error, tools) => {
            if (error !== null || tools === null || this.#client !== client) return;
            this.#tools = tools.map(toMcpTool);
            this.#notify();
          },
        },
      },
    });
    client.onclose = () => {
      isClosed = true;
      if (this.#client === client) this.#lost(exitReason(this.#options.config, stderr.tail));
    };
    // The SDK reports transport errors here too; closing is what counts, so they are not logged.
    client.onerror = () => {};
    const transport = this.#createTransport(stderr);
    const timeout = this.#options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    this.#startingClient = client;
    try {
      await checkWorkingDirectory(this.#options.config);
      await client.connect(transport, { timeout });
      const tools = await listAllTools(client, timeout);
      if (isClosed)
        throw new McpServerNotRunningError(this.name, exitReason(this.#options.config, stderr.tail));
      if (this.#state === "closed") {
        await closeClient(client);
        return;
      }
      this.#client = client;
      this.#pid = transport instanceof StdioClientTransport ? (transport.pid ?? undefined) : undefined;
      this.#tools = tools;
      this.#connectedAt = (this.#options.now ?? Date.now)();
      if (this.#loggedReason !== undefined) {
        this.#options.log?.(`MCP server ${this.name}: running again (${tools.length} tools)`);
      }
      this.#loggedReason = undefined;
      this.#setState("running", "");
    } catch (error) {
      await closeClient(client);
      if (this.#state === "closed") return;
      // A process that could not be spawned at all also "closes": its spawn error says more.
      const isSpawnError = typeof (error as NodeJS.ErrnoException).syscall === "string";
      const reason =
        isClosed && !isSpawnError ? exitReason(this.#options.config, stderr.tail) : describeError(error);
      this.#scheduleRestart(`cannot start: ${reason}`);
    } finally {
      if (this.#startingClient === client) this.#startingClient = undefined;
    }
  }

  #createTransport(stderr: { tail: string }): Transport {
    const { config } = this.#options;
    if (!isStdioServerConfig(config)) {
      return new StreamableHTTPClientTransport(new URL(config.url), {
        ...(config.headers === undefined ? {} : { requestInit: { headers: config.headers } }),
      });
    }
    const transport = new StdioClientTransport({
      command: config.command,
      args: config.args ?? [],
      env: serverEnvironment(this.#options.env ?? {}, config.env),
      // Piped, not inherited: a server's chatter must not reach the host's stderr; its last words
      // are kept for the log line that says why it stopped.
      stderr: "pipe",
      ...(config.cwd === undefined ? {} : { cwd: config.cwd }),
    });
    transport.stderr?.on("data", (chunk: Buffer | string) => {
      stderr.tail = `${stderr.tail}${chunk.toString()}`.slice(-STDERR_TAIL_CHARS);
    });
    return transport;
  }

  /** The running server stopped: forget its client and schedule a restart. */
  #lost(reason: string): void {
    const client = this.#client;
    this.#client = undefined;
    this.#pid = undefined;
    if (client !== undefined) void closeClient(client);
    if (this.#state === "closed") return;
    const now = (this.#options.now ?? Date.now)();
    const stableAfterMs =
      this.#options.stableAfterMs ?? this.#options.maxRestartDelayMs ?? DEFAULT_MAX_RESTART_DELAY_MS;
    if (this.#connectedAt !== undefined && now - this.#connectedAt >= stableAfterMs) this.#failures = 0;
    this.#scheduleRestart(`stopped: ${reason}`);
  }

  #scheduleRestart(reason: string): void {
    this.#failures += 1;
    const initial = this.#options.initialRestartDelayMs ?? DEFAULT_INITIAL_RESTART_DELAY_MS;
    const max = this.#options.maxRestartDelayMs ?? DEFAULT_MAX_RESTART_DELAY_MS;
    const delayMs = Math.min(max, initial * 2 ** (this.#failures - 1));
    this.#setState("waiting", reason);
    // One line when trouble starts or changes, not one per retry of a server that stays broken.
    if (reason !== this.#loggedReason) {
      this.#options.log?.(
        `MCP server ${this.name} ${reason}; retrying in ${formatSeconds(delayMs)}, backing off to ${formatSeconds(max)}`,
      );
      this.#loggedReason = reason;
    }
    const schedule = this.#options.schedule ?? scheduleWithTimer;
    this.#cancelRestart = schedule(() => {
      this.#cancelRestart = undefined;
      if (this.#state === "waiting") void this.#connect();
    }, delayMs);
  }

  #setState(state: McpConnectionState, reason: string): void {
    this.#state = state;
    this.#reason = reason;
    this.#notify();
  }

  #notify(): void {
    for (const listener of this.#listeners) listener();
  }
}

/**
 * A stdio server's environment: PATH, HOME and the locale from the host (as the shell tool's
 * commands get) plus what its configuration lists. Nothing else of the host's: it holds API keys.
 */
export function serverEnvironment(
  hostEnv: NodeJS.ProcessEnv,
  listed: Readonly<Record<string, string>> = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of SHELL_BASE_ENV) {
    const value = hostEnv[name];
    if (value !== undefined) env[name] = value;
  }
  return { ...env, ...listed };
}

/** Spawning in a missing directory fails as ENOENT of the command: say which one is missing. */
async function checkWorkingDirectory(config: McpServerConfig): Promise<void> {
  if (!isStdioServerConfig(config) || config.cwd === undefined) return;
  const isDirectory = await stat(config.cwd).then(
    (stats) => stats.isDirectory(),
    () => false,
  );
  if (!isDirectory) throw new ConfigurationError(`working directory not found: ${config.cwd}`);
}

async function listAllTools(client: Client, timeout: number): Promise<McpTool[]> {
  if (client.getServerCapabilities()?.tools === undefined) return [];
  const tools: McpTool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout });
    tools.push(...page.tools.map(toMcpTool));
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return tools;
}

/** The server's schema goes to the model as it is, but for the dialect marker (noise in every request). */
function toMcpTool(tool: SdkTool): McpTool {
  const { $schema: _dialect, ...inputSchema } = tool.inputSchema as Record<string, unknown>;
  return {
    name: tool.name,
    description: tool.description ?? tool.title ?? tool.annotations?.title ?? "",
    inputSchema,
    idempotent: tool.annotations?.idempotentHint === true,
  };
}

async function closeClient(client: Client): Promise<void> {
  try {
    await client.close();
  } catch {
    // Already gone: closing is best effort (the stdio transport still kills the process).
  }
}

function exitReason(config: McpServerConfig, stderrTail: string): string {
  if (!isStdioServerConfig(config)) return "the connection closed";
  const lastLine = stderrTail
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== "")
    .at(-1);
  return lastLine === undefined ? "the process exited" : `the process exited (last stderr line: ${lastLine})`;
}

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as NodeJS.ErrnoException).code;
  // spawn ENOENT says only "spawn x ENOENT": say what it means.
  if (code === "ENOENT" && "path" in error)
    return `command not found: ${String((error as { path: unknown }).path)}`;
  return error.message;
}

function formatSeconds(ms: number): string {
  return `${ms / 1000} s`;
}

function scheduleWithTimer(run: () => void, delayMs: number): () => void {
  const timer = setTimeout(run, delayMs);
  // A pending restart alone must not keep the process alive.
  timer.unref();
  return () => clearTimeout(timer);
}

function untilSettledOrAborted(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const onAbort = () => resolve();
    signal.addEventListener("abort", onAbort, { once: true });
    void promise.then(
      () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      },
      () => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      },
    );
  });
}
