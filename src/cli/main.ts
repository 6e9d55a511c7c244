import { ChatFailedError } from "../agent/chat-errors.js";
import { resolveRuntimeConfig, secretRedactorFor } from "../config/runtime-config.js";
import { EXIT_USER_MISTAKE, mappingOf } from "../errors/error-code.js";
import { toErrorInfo } from "../errors/error-info.js";
import { NO_SECRETS } from "../text/secret-redactor.js";
import { truncateText } from "../text/truncate-text.js";
import { VERSION } from "../version.js";
import { type CliContext, type Command, UsageError } from "./cli-context.js";
import { agentsCommand } from "./commands/agents.js";
import { chatCommand } from "./commands/chat.js";
import { mcpCommand } from "./commands/mcp.js";
import { serveCommand } from "./commands/serve.js";
import { sessionsCommand } from "./commands/sessions.js";
import { tailCommand } from "./commands/tail.js";
import { uiCommand } from "./commands/ui.js";
import { upCommand } from "./commands/up.js";
import { vizCommand } from "./commands/viz.js";
import { type FlagKind, parseArgs } from "./parse-args.js";
import { withTelemetry } from "./telemetry.js";

const GLOBAL_FLAGS: Record<string, FlagKind> = {
  provider: "string",
  model: "string",
  "base-url": "string",
  "max-iterations": "string",
  "reasoning-effort": "string",
  "context-window": "string",
  "stream-idle-timeout": "string",
  nats: "string",
  "nats-creds": "string",
  "inbox-prefix": "string",
  db: "string",
  prefix: "string",
  help: "boolean",
  version: "boolean",
};

/** A host's identity and where it keeps histories (serve, up). */
const HOST_FLAGS: Record<string, FlagKind> = {
  "host-id": "string",
  history: "string",
};

/** The Agent Protocol's flags (serve, up): `--owner`, and its two intervals. */
const PROTOCOL_FLAGS: Record<string, FlagKind> = {
  owner: "string",
  heartbeat: "string",
  "keep-alive": "string",
  "liveness-query": "string",
};

/** Several hosts on one NATS system (serve, up). */
const CLUSTER_FLAGS: Record<string, FlagKind> = {
  "lease-ttl": "string",
  "dedupe-window": "string",
  "js-replicas": "string",
};

/** How the web UI lets people in (ui, up): its token, extra host names, the event-stream cap. */
const UI_FLAGS: Record<string, FlagKind> = {
  host: "string",
  "ui-token": "string",
  "ui-allowed-hosts": "string",
  "ui-max-streams": "string",
};

/** `arguments: false`: the command takes flags only, so a stray word is a mistake worth telling. */
const COMMANDS: Record<
  string,
  { run: Command; flags: Record<string, FlagKind>; usage: string; arguments?: false }
> = {
  up: {
    run: withTelemetry(upCommand),
    flags: {
      port: "string",
      ...UI_FLAGS,
      agents: "string",
      config: "string",
      "idle-timeout": "string",
      "max-sessions": "string",
      "max-memory-bytes": "string",
      "max-session-bytes": "string",
      "nats-hold-mb": "string",
      ...HOST_FLAGS,
      ...PROTOCOL_FLAGS,
      ...CLUSTER_FLAGS,
    },
    usage:
      "up [--port N] [--host ADDR] [--ui-token T] [--agents FILE | --config FILE] [--idle-timeout 12h] [--max-sessions N] [--max-memory-bytes 512m] [--max-session-bytes N] [--nats-hold-mb 64] [--host-id ID] [--history sqlite|nats] [--lease-ttl 10s] [--dedupe-window 10m] [--js-replicas N] [--owner NAME]",
    arguments: false,
  },
  serve: {
    run: withTelemetry(serveCommand),
    flags: {
      agents: "string",
      config: "string",
      "idle-timeout": "string",
      "max-sessions": "string",
      "max-memory-bytes": "string",
      "max-session-bytes": "string",
      "nats-hold-mb": "string",
      http: "string",
      ...UI_FLAGS,
      ...HOST_FLAGS,
      ...PROTOCOL_FLAGS,
      ...CLUSTER_FLAGS,
    },
    usage:
      "serve [--http PORT [--host ADDR] [--ui-token T]] [--agents FILE | --config FILE] [--idle-timeout 12h] [--max-sessions N] [--max-memory-bytes 512m] [--max-session-bytes N] [--nats-hold-mb 64] [--host-id ID] [--history sqlite|nats] [--lease-ttl 10s] [--dedupe-window 10m] [--js-replicas N] [--owner NAME]",
    arguments: false,
  },
  chat: {
    run: withTelemetry(chatCommand),
    flags: { agent: "string", session: "string", local: "boolean", events: "string" },
    usage: "chat [--agent NAME] [--session ID] [--local] [--events jsonl|pretty|none] MESSAGE",
  },
  tail: {
    run: tailCommand,
    flags: { jsonl: "string", since: "string" },
    usage: "tail [FILTER] [--jsonl FILE] [--since DURATION|SEQ]",
  },
  ui: {
    run: uiCommand,
    flags: { port: "string", ...UI_FLAGS },
    usage: "ui [--port N] [--host ADDR] [--ui-token T] [--ui-allowed-hosts a,b] [--ui-max-streams N]",
    arguments: false,
  },
  sessions: {
    run: sessionsCommand,
    flags: { json: "boolean" },
    usage: "sessions [--nats URL] [--json]",
    arguments: false,
  },
  agents: {
    run: agentsCommand,
    flags: { timeout: "string", json: "boolean" },
    usage: "agents [--nats URL] [--timeout 5s] [--json]",
    arguments: false,
  },
  mcp: {
    run: mcpCommand,
    flags: {},
    usage: "mcp [--nats URL] [--prefix P]   (an MCP server on stdio: one tool per agent)",
    arguments: false,
  },
  viz: {
    run: vizCommand,
    flags: { machine: "string", format: "string" },
    usage: "viz [--machine chat|iteration|session|compaction] [--format mermaid|json|svg]",
    arguments: false,
  },
};

const HELP = `agentloop: the agentic loop as statecharts, sessions as actors, events on NATS

Usage: agentloop <command> [options]

Commands:
${Object.values(COMMANDS)
  .map((command) => `  agentloop ${command.usage}`)
  .join("\n")}

Provider and shared options (flags win over the environment):
  --provider anthropic|openai-chat|openai-responses|demo   (AGENTLOOP_PROVIDER; default: by key, else demo)
  --model NAME            (AGENTLOOP_MODEL)
  --base-url URL          (ANTHROPIC_BASE_URL / OPENAI_BASE_URL); keys: ANTHROPIC_API_KEY / OPENAI_API_KEY
  --max-iterations N      iterations per chat (default 20)
  --reasoning-effort low|medium|high
  --context-window N      (AGENTLOOP_CONTEXT_WINDOW) tokens the compaction ratio is measured against
  --stream-idle-timeout D (AGENTLOOP_STREAM_IDLE_TIMEOUT) a stream silent this long fails (default 120s)
  --nats URL              (NATS_URL, default nats://127.0.0.1:4222); --nats-creds FILE (NATS_CREDS)
  --inbox-prefix P        (AGENTLOOP_INBOX_PREFIX) reply inboxes on P.> instead of _INBOX.> (default _INBOX)
  --db PATH               (AGENTLOOP_DB) SQLite history file
  --prefix NAME           (AGENTLOOP_PREFIX) subject prefix, default agentloop

Web UI options (ui, up, and serve with --http PORT: the UI and the protocol doors on that port):
  --host ADDR             address to listen on (default 127.0.0.1); any other needs a token
  --ui-token T            (AGENTLOOP_UI_TOKEN) token every API call must carry, even on loopback;
                          default: none on loopback, a random one (printed in the URL) elsewhere
  --ui-allowed-hosts a,b  (AGENTLOOP_UI_ALLOWED_HOSTS) names the page may be reached by, besides
                          loopback and this machine's addresses (name or name:port)
  --ui-max-streams N      (AGENTLOOP_UI_MAX_STREAMS) live event streams open at once (default 256)
`;

/** Runs the CLI and resolves with the exit code. Never throws: errors become one line on stderr. */
export async function main(
  argv: readonly string[],
  io: Pick<CliContext, "stdout" | "stderr" | "stdin" | "env" | "signal" | "urgentSignal">,
): Promise<number> {
  let redactor = NO_SECRETS;
  try {
    const first = parseArgs(argv, {
      ...GLOBAL_FLAGS,
      ...Object.assign({}, ...Object.values(COMMANDS).map((c) => c.flags)),
    });
    if (first.flags.version) {
      io.stdout.write(`agentloop ${VERSION}\n`);
      return 0;
    }
    if (first.command === undefined || first.flags.help || first.command === "help") {
      io.stdout.write(HELP);
      return first.command === undefined && !first.flags.help ? 2 : 0;
    }
    const command = COMMANDS[first.command];
    if (!command)
      throw new UsageError(`unknown command "${first.command}" (try: ${Object.keys(COMMANDS).join(", ")})`);
    const parsed = parseArgs(argv, { ...GLOBAL_FLAGS, ...command.flags });
    if (command.arguments === false && parsed.positionals.length > 0) {
      throw new UsageError(
        `${first.command} takes no arguments, got "${parsed.positionals[0]}" (usage: agentloop ${command.usage})`,
      );
    }
    const config = resolveRuntimeConfig(parsed.flags, io.env);
    redactor = secretRedactorFor(config, io.env);
    return await command.run({ ...io, positionals: parsed.positionals, flags: parsed.flags, config });
  } catch (error) {
    io.stderr.write(`agentloop: ${redactor.redact(describeError(error))}\n`);
    return exitCodeOf(error);
  }
}

/** The exit code for what a command failed with, from the code table (src/errors/error-code.ts). */
export function exitCodeOf(error: unknown): number {
  return mappingOf(toErrorInfo(error).code).exitCode;
}

/** One line, no stack trace. */
export function describeError(error: unknown): string {
  if (error instanceof ChatFailedError) {
    return `chat failed: ${error.info.name ?? error.info.code}: ${oneLine(error.message)}`;
  }
  if (error instanceof Error) {
    const prefix = isConfigurationMistake(error) ? "" : `${error.name}: `;
    return `${prefix}${oneLine(error.message)}`;
  }
  return oneLine(String(error));
}

/** The user's to fix (a flag, a file, a URL, credentials): exit 2, and no class name in the line. */
function isConfigurationMistake(error: unknown): boolean {
  return exitCodeOf(error) === EXIT_USER_MISTAKE;
}

function oneLine(text: string): string {
  const line = text.replace(/\s*\n\s*/g, " ").trim();
  return truncateText(line, 500);
}
