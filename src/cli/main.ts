import { ChatFailedError } from "../agent/chat-errors.js";
import { resolveRuntimeConfig, secretRedactorFor } from "../config/runtime-config.js";
import { EXIT_USER_MISTAKE, mappingOf } from "../errors/error-code.js";
import { toErrorInfo } from "../errors/error-info.js";
import { NO_SECRETS } from "../text/secret-redactor.js";
import { truncateText } from "../text/truncate-text.js";
import { VERSION } from "../version.js";
import { type CliContext, type Command, UsageError } from "./cli-context.js";
import { closestMatch } from "./closest-match.js";
import { COMMAND_HELP, HELP_WIDTH, renderCommandHelp, renderOptions, wrapWords } from "./command-help.js";
import { agentsCommand } from "./commands/agents.js";
import { approveCommand, denyCommand, pendingCommand } from "./commands/approvals.js";
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

/** The flags every command takes: a command's help names them once instead of describing each. */
const SHARED_FLAGS: ReadonlySet<string> = new Set(Object.keys(GLOBAL_FLAGS));

/** A host's identity and where it keeps histories (serve, up). */
const HOST_FLAGS: Record<string, FlagKind> = {
  "host-id": "string",
  history: "string",
  "quiet-gc": "string",
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
  "lease-skew": "string",
  shards: "string",
  "resume-rate": "string",
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
      "max-chat-time": "string",
      "max-loop-delay": "string",
      "max-chats": "string",
      "parent-lease": "string",
      "max-sessions": "string",
      "max-memory-bytes": "string",
      "max-session-bytes": "string",
      "nats-hold-mb": "string",
      ...HOST_FLAGS,
      ...PROTOCOL_FLAGS,
      ...CLUSTER_FLAGS,
    },
    usage:
      "up [--port N] [--host ADDR] [--ui-token T] [--agents FILE | --config FILE] [--idle-timeout 12h] [--max-chat-time 10m] [--max-loop-delay 1s] [--max-chats 1000] [--parent-lease 30s] [--max-sessions N] [--max-memory-bytes 512m] [--max-session-bytes N] [--nats-hold-mb 64] [--host-id ID] [--history sqlite|nats] [--quiet-gc 10s|off] [--lease-ttl 10s] [--lease-skew 500ms] [--shards 1024] [--resume-rate 50] [--dedupe-window 10m] [--js-replicas N] [--owner NAME]",
    arguments: false,
  },
  serve: {
    run: withTelemetry(serveCommand),
    flags: {
      agents: "string",
      config: "string",
      "idle-timeout": "string",
      "max-chat-time": "string",
      "max-loop-delay": "string",
      "max-chats": "string",
      "parent-lease": "string",
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
      "serve [--http PORT [--host ADDR] [--ui-token T]] [--agents FILE | --config FILE] [--idle-timeout 12h] [--max-chat-time 10m] [--max-loop-delay 1s] [--max-chats 1000] [--parent-lease 30s] [--max-sessions N] [--max-memory-bytes 512m] [--max-session-bytes N] [--nats-hold-mb 64] [--host-id ID] [--history sqlite|nats] [--quiet-gc 10s|off] [--lease-ttl 10s] [--lease-skew 500ms] [--shards 1024] [--resume-rate 50] [--dedupe-window 10m] [--js-replicas N] [--owner NAME]",
    arguments: false,
  },
  chat: {
    run: withTelemetry(chatCommand),
    flags: {
      agent: "string",
      session: "string",
      local: "boolean",
      events: "string",
      agents: "string",
      config: "string",
    },
    usage:
      "chat [--agent NAME] [--session ID] [--local [--agents FILE | --config FILE]] [--events jsonl|pretty|none] MESSAGE",
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
  pending: {
    run: pendingCommand,
    flags: { agent: "string", json: "boolean" },
    usage: "pending [--agent NAME] [--json] [--nats URL]",
    arguments: false,
  },
  approve: {
    run: approveCommand,
    flags: { reason: "string" },
    usage: "approve <agent> <session> [toolCallId] [--reason TEXT] [--nats URL]",
  },
  deny: {
    run: denyCommand,
    flags: { reason: "string" },
    usage: "deny <agent> <session> [toolCallId] [--reason TEXT] [--nats URL]",
  },
};

const HELP = [
  "agentloop: the agentic loop as statecharts, sessions as actors, events on NATS",
  "",
  "Usage: agentloop <command> [options]      agentloop <command> --help: its options and examples",
  "",
  "Commands:",
  ...Object.keys(COMMANDS).flatMap((name) =>
    wrapWords(COMMAND_HELP[name]?.summary ?? "", HELP_WIDTH, " ".repeat(14)).map((line, index) =>
      index === 0 ? `  ${name.padEnd(10)}  ${line.trimStart()}` : line,
    ),
  ),
  "",
  "Shared options (flags win over the environment; keys come from ANTHROPIC_API_KEY, OPENAI_API_KEY):",
  ...renderOptions(Object.keys(GLOBAL_FLAGS)),
  "",
  "Examples:",
  "  agentloop up                                   host + logger + UI; open the URL it prints",
  '  agentloop chat --local "what did I say first?"   one message, no host, no NATS',
  "",
].join("\n");

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
    // `agentloop help chat` is `agentloop chat --help`.
    const helpFor = first.command === "help" ? first.positionals[0] : first.command;
    if (
      first.command === undefined ||
      helpFor === undefined ||
      (first.command === "help" && COMMANDS[helpFor] === undefined)
    ) {
      io.stdout.write(HELP);
      return first.command === undefined && !first.flags.help ? 2 : 0;
    }
    const command = COMMANDS[first.command === "help" ? helpFor : first.command];
    if (!command) {
      const match = closestMatch(first.command, Object.keys(COMMANDS));
      throw new UsageError(
        `unknown command "${first.command}" (${match === undefined ? "" : `did you mean ${match}? `}commands: ${Object.keys(COMMANDS).join(", ")})`,
      );
    }
    if (first.flags.help || first.command === "help") {
      io.stdout.write(renderCommandHelp(helpFor, command.usage, Object.keys(command.flags), SHARED_FLAGS));
      return 0;
    }
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
