import { spawn } from "node:child_process";
import { realpath } from "node:fs/promises";
import { isAbsolute, relative, resolve, sep } from "node:path";
import { z } from "zod";
import type { ToolCall, ToolDefinition } from "../llm/types.js";
import { sliceCodePoints } from "../text/truncate-text.js";
import { BackgroundTasks } from "./background-tasks.js";
import { defineTool, type Tool } from "./define-tool.js";
import { findShellIsolation, SHELL_ISOLATIONS, type ShellIsolation } from "./shell-isolation.js";
import { ToolCancelledError, ToolError, ToolNotFoundError } from "./tool-errors.js";
import type { ToolContext, ToolSet } from "./tool-set.js";

const TOOL_NAME = "shell";

/** Default foreground timeout. */
export const DEFAULT_SHELL_TIMEOUT_MS = 60_000;
/** The longest timeout the model may ask for. */
export const MAX_SHELL_TIMEOUT_MS = 30 * 60 * 1000;
/** Output kept per command (stdout and stderr interleaved), before the runner's own cap. */
export const DEFAULT_SHELL_MAX_OUTPUT_CHARS = 6_000;

/**
 * How much output is kept past the cap until secrets are redacted: a secret that starts before the
 * cap ends within this many characters of it (keys, tokens and credentials seeds are far shorter).
 */
const REDACTION_MARGIN_CHARS = 8_192;
/**
 * The variables every command gets from the host's environment: where programs are, the home
 * directory, and the locale (LC_ALL too, since it overrides LANG: without it a host set up with
 * LC_ALL=C.UTF-8 alone would run commands in the ASCII locale). Nothing else: the host's
 * environment holds its API keys and NATS credentials. An agent adds names with `passEnv`.
 */
export const SHELL_BASE_ENV: readonly string[] = ["PATH", "HOME", "LANG", "LC_ALL"];

/** Logged once per process when commands cannot be isolated from the host's processes. */
export const NO_SHELL_ISOLATION_NOTICE =
  "shell: commands run without process isolation (neither `unshare --pid --fork --mount-proc` nor `bwrap` works here): a command can read the host's environment, API keys included, through /proc";

export const ShellArguments = z.object({
  command: z.string().min(1).describe("The command line, run by /bin/sh -c."),
  cwd: z
    .string()
    .optional()
    .describe("Working directory, relative to the workspace (default: the workspace)."),
  timeoutSeconds: z
    .number()
    .positive()
    .max(MAX_SHELL_TIMEOUT_MS / 1000)
    .optional()
    .describe("Kill the command after this many seconds (default 60)."),
  background: z
    .boolean()
    .optional()
    .describe(
      "Run in the background: returns a task id now; the result arrives later as a task_result message.",
    ),
});
export type ShellArguments = z.infer<typeof ShellArguments>;

export interface ShellToolSetOptions {
  /** The workspace: commands run here, and `cwd` may not leave it. Default: the process's cwd. */
  workingDirectory?: string;
  /** Default 60 s. */
  timeoutMs?: number;
  /** Default 6,000 characters. */
  maxOutputChars?: number;
  /**
   * Where the commands' variables are read from (the host passes the process's). Commands see
   * only {@link SHELL_BASE_ENV} and `passEnv` of it.
   * @defaultValue `{}`: none, so commands run without PATH (the shell's built-in default path)
   */
  env?: NodeJS.ProcessEnv;
  /** More variables passed to the commands (an agent's `shellEnv`). */
  passEnv?: readonly string[];
  /** Default `/bin/sh`. */
  shell?: string;
  /** Task ids (injected for tests). */
  createTaskId?: () => string;
  /**
   * How commands are kept from seeing the host's processes, tried in order at the first command
   * (default {@link SHELL_ISOLATIONS}); an empty list runs them without isolation.
   */
  isolations?: readonly ShellIsolation[];
  /** One-line notices: that commands run without isolation (once per process). */
  log?: (line: string) => void;
}

/** What one command did. */
export interface ShellRun {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  output: string;
  truncated: boolean;
}

/**
 * The opt-in `shell` ToolSet: runs a command in the workspace with a timeout and a cap on its
 * output, in the foreground (the result is the tool's) or in the background (a task id now, a
 * `task_result` message later). Not a sandbox: the command has the host's rights (it can read
 * any file the host can, by absolute path, and use the network); it only starts in the workspace,
 * sees a minimal environment ({@link shellEnvironment}) and, where the machine allows it, runs in
 * a PID namespace of its own with its own `/proc` ({@link findShellIsolation}), so the host's
 * process environment (its API keys) cannot be read through `/proc/<pid>/environ`. Each session
 * gets its own copy, so `reset()` cancels only that session's background commands.
 */
export function createShellToolSet(options: ShellToolSetOptions = {}): ToolSet {
  return new ShellToolSet(options);
}

class ShellToolSet implements ToolSet {
  readonly name = TOOL_NAME;
  readonly #options: ShellToolSetOptions;
  readonly #workspace: string;
  readonly #env: NodeJS.ProcessEnv;
  readonly #tasks: BackgroundTasks;
  readonly #tool: Tool;

  constructor(options: ShellToolSetOptions) {
    this.#options = options;
    this.#workspace = resolve(options.workingDirectory ?? process.cwd());
    this.#env = shellEnvironment(options.env ?? {}, options.passEnv);
    this.#tasks = new BackgroundTasks(
      options.createTaskId === undefined ? {} : { createId: options.createTaskId },
    );
    this.#tool = defineTool({
      name: TOOL_NAME,
      description:
        "Runs a shell command in the workspace and returns its exit code and output (stdout and stderr, capped). " +
        "Use background: true for long commands.",
      parameters: ShellArguments,
      execute: (args, context) => this.#execute(args, context),
    });
  }

  tools(): ToolDefinition[] {
    return [this.#tool.definition];
  }

  invoke(call: ToolCall, context: ToolContext): Promise<string> {
    if (call.name !== TOOL_NAME) return Promise.reject(new ToolNotFoundError(call.name));
    return this.#tool.invoke(call.arguments, context);
  }

  /** A command may change anything: never run again after a host stopped mid-call. */
  isIdempotent(): boolean {
    return false;
  }

  prompt(): string {
    return `You can run shell commands with the \`shell\` tool; they run in ${this.#workspace}.`;
  }

  iterationPromptInjection(): string {
    const running = this.#tasks.running;
    return running.length === 0 ? "" : `Background shell tasks still running: ${running.join(", ")}.`;
  }

  copy(): ToolSet {
    return new ShellToolSet(this.#options);
  }

  reset(): void {
    this.#tasks.cancelAll();
  }

  async #execute(args: ShellArguments, context: ToolContext): Promise<string> {
    const cwd = await this.#resolveCwd(args.cwd);
    const timeoutMs =
      args.timeoutSeconds === undefined
        ? (this.#options.timeoutMs ?? DEFAULT_SHELL_TIMEOUT_MS)
        : args.timeoutSeconds * 1000;
    // Secrets are hidden before the output is cut: cut first, a key at the cut would leave all
    // but its last characters, which no redactor recognizes.
    const shown = {
      maxChars: this.#maxOutputChars,
      ...(context.redact === undefined ? {} : { redact: context.redact }),
    };
    if (args.background === true) {
      const id = this.#tasks.start(
        context,
        async (signal) =>
          formatShellRun(await this.#run(args.command, cwd, timeoutMs, signal), timeoutMs, shown),
        { label: args.command },
      );
      return `started background task ${id}; its result will arrive as a task_result message`;
    }
    const run = await this.#run(args.command, cwd, timeoutMs, context.signal);
    if (context.signal.aborted) throw new ToolCancelledError(TOOL_NAME);
    return formatShellRun(run, timeoutMs, shown);
  }

  get #maxOutputChars(): number {
    return this.#options.maxOutputChars ?? DEFAULT_SHELL_MAX_OUTPUT_CHARS;
  }

  /**
   * The real directory to run in. Both paths are resolved through their symlinks before the
   * containment check: checked as strings, `cwd: "link"` with `link -> /` would run outside.
   */
  async #resolveCwd(cwd: string | undefined): Promise<string> {
    const workspace = await realDirectory(this.#workspace, "the workspace");
    if (cwd === undefined || cwd === "") return workspace;
    const target = await realDirectory(resolve(workspace, cwd), "cwd");
    const inside = relative(workspace, target);
    if (inside === ".." || inside.startsWith(`..${sep}`) || isAbsolute(inside)) {
      throw new ToolError(`cwd must stay inside the workspace ${this.#workspace}`, { toolName: TOOL_NAME });
    }
    return target;
  }

  async #run(command: string, cwd: string, timeoutMs: number, signal: AbortSignal): Promise<ShellRun> {
    const isolation = await findShellIsolation(this.#options.isolations ?? SHELL_ISOLATIONS);
    if (isolation === undefined) noteNoIsolation(this.#options.log);
    return runShellCommand(command, {
      cwd,
      timeoutMs,
      signal,
      // Collected past the cap, so a secret that crosses it is whole when redacted.
      maxOutputChars: this.#maxOutputChars + REDACTION_MARGIN_CHARS,
      shell: this.#options.shell ?? "/bin/sh",
      env: this.#env,
      ...(isolation === undefined ? {} : { isolation }),
    });
  }
}

/** The log functions told that commands run without isolation (each once). */
const notified = new WeakSet<(line: string) => void>();

function noteNoIsolation(log: ((line: string) => void) | undefined): void {
  if (log === undefined || notified.has(log)) return;
  notified.add(log);
  log(NO_SHELL_ISOLATION_NOTICE);
}

/**
 * The environment a command runs with: {@link SHELL_BASE_ENV} and the `passEnv` names, taken
 * from `source` where set. Everything else (API keys, NATS credentials, whatever the host was
 * started with) stays out: a command's output goes to the model, the history and the events.
 */
export function shellEnvironment(
  source: NodeJS.ProcessEnv,
  passEnv: readonly string[] = [],
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const name of [...SHELL_BASE_ENV, ...passEnv]) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

async function realDirectory(path: string, what: string): Promise<string> {
  try {
    return await realpath(path);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === "ENOENT" ? "no such directory" : (error as Error).message;
    throw new ToolError(`cannot run the command: ${what} ${path}: ${reason}`, {
      toolName: TOOL_NAME,
      cause: error,
    });
  }
}

/**
 * Runs `command` with `shell -c` in its own process group, so a timeout or an abort kills the
 * whole pipeline, not just the shell; the group also dies with this process, even on SIGKILL
 * (see {@link spawnTiedToHost}). With `isolation`, the shell runs inside it (its own PID
 * namespace and `/proc`). Output beyond `maxOutputChars` is dropped (and flagged). Rejects only
 * when the process cannot be started (e.g. the directory does not exist).
 */
export function runShellCommand(
  command: string,
  options: {
    cwd: string;
    timeoutMs: number;
    signal: AbortSignal;
    maxOutputChars: number;
    shell: string;
    env: NodeJS.ProcessEnv;
    isolation?: ShellIsolation;
  },
): Promise<ShellRun> {
  return new Promise((resolvePromise, reject) => {
    let output = "";
    let truncated = false;
    let timedOut = false;
    const program = [...(options.isolation?.prefix ?? []), options.shell, "-c", command];
    const child = spawnTiedToHost(program, { cwd: options.cwd, env: options.env });
    const kill = () => {
      if (child.pid === undefined || child.exitCode !== null) return;
      try {
        process.kill(-child.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    };
    const collect = (text: string) => {
      if (truncated) return;
      const room = options.maxOutputChars - output.length;
      if (text.length > room) {
        // Never half an emoji at the cut (a lone surrogate is refused by providers).
        output += sliceCodePoints(text, Math.max(0, room));
        truncated = true;
      } else output += text;
    };
    // Decoded per stream, so a character split between two chunks arrives whole.
    child.stdout.setEncoding("utf8").on("data", collect);
    child.stderr.setEncoding("utf8").on("data", collect);
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, options.timeoutMs);
    const onAbort = () => kill();
    if (options.signal.aborted) kill();
    else options.signal.addEventListener("abort", onAbort, { once: true });
    const finish = () => {
      clearTimeout(timer);
      options.signal.removeEventListener("abort", onAbort);
    };
    child.once("error", (error) => {
      finish();
      reject(
        new ToolError(`cannot run the command: ${error.message}`, { toolName: TOOL_NAME, cause: error }),
      );
    });
    child.once("close", (exitCode, signal) => {
      finish();
      resolvePromise({ exitCode, signal, timedOut, output, truncated });
    });
  });
}

/**
 * The supervisor every command runs under (`/bin/sh -c SUPERVISOR agentloop-shell PROGRAM…`, the
 * program being `SHELL -c COMMAND`, behind the isolation's prefix when there is one).
 * It keeps the host's pipe (its stdin) on fd 3 and gives the command /dev/null instead; a watcher
 * blocks reading fd 3. The host never writes to that pipe and holds its only write end, so the
 * watcher reads end-of-file exactly when the host is gone — even killed with SIGKILL, which runs
 * no handler — and then kills the whole process group. When the command ends first, the watcher
 * is stopped and the command's exit status passed on.
 */
const HOST_DEATH_SUPERVISOR = [
  "exec 3<&0 </dev/null",
  "( while read -r _ <&3; do :; done; kill -KILL 0 ) >/dev/null 2>&1 &",
  "watcher=$!",
  "exec 3<&-",
  '"$@"',
  "status=$?",
  'kill "$watcher" 2>/dev/null',
  'exit "$status"',
].join("\n");

/**
 * Starts `program` (e.g. `sh -c command`) so that it dies with this process. It gets its own
 * process group (so a timeout or an abort kills the whole pipeline with one signal, inside an
 * isolation's namespace too), and that group is killed when this process exits or is killed:
 * Node cannot set PR_SET_PDEATHSIG (which would reach only the direct child anyway), so a
 * supervisor watches a pipe only this process holds open.
 */
function spawnTiedToHost(program: readonly string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
  const child = spawn("/bin/sh", ["-c", HOST_DEATH_SUPERVISOR, "agentloop-shell", ...program], {
    cwd: options.cwd,
    env: options.env,
    detached: true,
    stdio: ["pipe", "pipe", "pipe"],
  });
  // Nothing is ever written: the pipe is only the host's lifeline. A late EPIPE is no news.
  child.stdin.on("error", () => {});
  return child;
}

/**
 * `exit code: N` (or how it ended), then the output: with `shown`, secrets redacted first, then
 * cut to `maxChars`.
 */
export function formatShellRun(
  run: ShellRun,
  timeoutMs: number,
  shown: { maxChars?: number; redact?: (text: string) => string } = {},
): string {
  let output = shown.redact === undefined ? run.output : shown.redact(run.output);
  let truncated = run.truncated;
  if (shown.maxChars !== undefined && output.length > shown.maxChars) {
    output = sliceCodePoints(output, shown.maxChars);
    truncated = true;
  }
  let status: string;
  const limit = timeoutMs < 1_000 ? `${timeoutMs} ms` : `${Math.round(timeoutMs / 1000)} s`;
  if (run.timedOut) status = `timed out after ${limit} (killed)`;
  else if (run.exitCode !== null) status = `exit code: ${run.exitCode}`;
  else status = `killed by ${run.signal ?? "a signal"}`;
  const marker = truncated ? "\n[output truncated]" : "";
  return output === "" ? `${status}\n(no output)` : `${status}\n${output}${marker}`;
}
