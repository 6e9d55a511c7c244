/**
 * What `agentloop <command> --help` prints: a line of what the command does, its usage wrapped at
 * {@link HELP_WIDTH} columns, its own options with their defaults, and two examples. The options'
 * wording lives here once ({@link FLAG_HELP}), shared by the commands that take the same flag.
 */

/** Help text never runs past this column (a usage line is wrapped, continuation lines indented). */
export const HELP_WIDTH = 100;

/** How one flag is shown: its value's placeholder (none for a switch) and what it does, with its default. */
export interface FlagHelp {
  value?: string;
  text: string;
}

/** A command's help beyond its flags: one line of what it does, and two examples. */
export interface CommandHelp {
  summary: string;
  examples: readonly [string, string];
}

/** Every command's flags and the shared ones, described once. */
export const FLAG_HELP: Readonly<Record<string, FlagHelp>> = {
  // Shared (every command).
  provider: {
    value: "anthropic|openai-chat|openai-responses|demo",
    text: "(AGENTLOOP_PROVIDER) default: anthropic with ANTHROPIC_API_KEY, else openai-chat with OPENAI_API_KEY, else demo",
  },
  model: { value: "NAME", text: "(AGENTLOOP_MODEL) default: the provider's" },
  "base-url": { value: "URL", text: "(ANTHROPIC_BASE_URL / OPENAI_BASE_URL) any OpenAI-compatible server" },
  "max-iterations": { value: "N", text: "iterations per chat (default 20)" },
  "reasoning-effort": { value: "low|medium|high", text: "thinking budget / effort" },
  "context-window": {
    value: "N",
    text: "(AGENTLOOP_CONTEXT_WINDOW) tokens the compaction ratio is measured against (default: the model's, else 128000)",
  },
  "stream-idle-timeout": {
    value: "D",
    text: "(AGENTLOOP_STREAM_IDLE_TIMEOUT) a model stream silent this long fails (default 120s)",
  },
  nats: { value: "URL", text: "(NATS_URL) default nats://127.0.0.1:4222" },
  "nats-creds": { value: "FILE", text: "(NATS_CREDS) a NATS credentials file" },
  "inbox-prefix": { value: "P", text: "(AGENTLOOP_INBOX_PREFIX) reply inboxes on P.> (default _INBOX)" },
  db: { value: "PATH", text: "(AGENTLOOP_DB) SQLite history file (default: histories in memory)" },
  prefix: { value: "NAME", text: "(AGENTLOOP_PREFIX) subject prefix (default agentloop)" },
  help: { text: "this help" },
  version: { text: "print the version" },
  // Hosts (serve, up).
  agents: { value: "FILE", text: "agents as JSON (default: one agent `assistant` with the built-in tools)" },
  config: { value: "FILE", text: "agents in code: agentloop.config.js / .mjs (.ts when tsx is installed)" },
  "idle-timeout": {
    value: "D",
    text: "(AGENTLOOP_IDLE_TIMEOUT) idle sessions are compacted and passivated (default 12h)",
  },
  "parent-lease": {
    value: "D",
    text: "(AGENTLOOP_PARENT_LEASE) an asked agent's chat stops this long after its asker stopped waiting (default 30s)",
  },
  "max-sessions": { value: "N", text: "(AGENTLOOP_MAX_SESSIONS) live sessions at most (default 10000)" },
  "max-memory-bytes": {
    value: "B",
    text: "(AGENTLOOP_MAX_MEMORY_BYTES) the live sessions' messages in memory, k/m/g units (default 512m)",
  },
  "max-session-bytes": {
    value: "B",
    text: "(AGENTLOOP_MAX_SESSION_BYTES) one session's messages in memory (default: no limit)",
  },
  "nats-hold-mb": {
    value: "N",
    text: "(AGENTLOOP_NATS_HOLD_MB) what is held while NATS is away (default 64)",
  },
  "host-id": { value: "ID", text: "(AGENTLOOP_HOST_ID) this host's id (default <hostname>-<pid>-<random>)" },
  history: { value: "sqlite|nats", text: "(AGENTLOOP_HISTORY) where histories live (default sqlite)" },
  "quiet-gc": {
    value: "D|off",
    text: "(AGENTLOOP_QUIET_GC) quiet this long after a burst, the host gives its memory back (default 10s)",
  },
  owner: { value: "NAME", text: "(AGENTLOOP_OWNER) the Agent Protocol's owner token (default agentloop)" },
  heartbeat: { value: "D", text: "(AGENTLOOP_HEARTBEAT) Agent Protocol heartbeat interval" },
  "keep-alive": { value: "D", text: "(AGENTLOOP_KEEP_ALIVE) keep-alive interval while a prompt runs" },
  "lease-ttl": { value: "D", text: "(AGENTLOOP_LEASE_TTL) session lease time to live (default 10s)" },
  "lease-skew": {
    value: "D",
    text: "(AGENTLOOP_LEASE_SKEW) clock error tolerated between hosts (default 500ms, at most a third of the TTL)",
  },
  "resume-rate": {
    value: "N",
    text: "(AGENTLOOP_RESUME_RATE) sessions resumed per second at most after a failover (default 50)",
  },
  "dedupe-window": {
    value: "D",
    text: "(AGENTLOOP_DEDUPE_WINDOW) how long a chat id's reply is kept (default 10m)",
  },
  "js-replicas": {
    value: "N",
    text: "(AGENTLOOP_JS_REPLICAS) replicas of the streams a host creates (default 1)",
  },
  // The web UI (ui, up).
  port: { value: "N", text: "the UI's port (default 4280; 0 picks a free one)" },
  host: { value: "ADDR", text: "the address the UI listens on (default 127.0.0.1; others need a token)" },
  "ui-token": { value: "T", text: "(AGENTLOOP_UI_TOKEN) token every UI API call must carry" },
  "ui-allowed-hosts": {
    value: "a,b",
    text: "(AGENTLOOP_UI_ALLOWED_HOSTS) extra names the UI may be reached by",
  },
  "ui-max-streams": {
    value: "N",
    text: "(AGENTLOOP_UI_MAX_STREAMS) live event streams at once (default 256)",
  },
  // chat.
  agent: { value: "NAME", text: "the agent (default assistant)" },
  session: { value: "ID", text: "the session (default default)" },
  local: { text: "run the agent in this process: no host, no NATS" },
  events: { value: "jsonl|pretty|none", text: "print the chat's events (default none: the answer only)" },
  // tail.
  jsonl: { value: "FILE", text: "also append every event to FILE, one JSON object per line" },
  since: {
    value: "DURATION|SEQ",
    text: "first replay stored events: from 10m ago, or from a stream sequence",
  },
  // sessions, agents, pending.
  json: { text: "one JSON object per line" },
  timeout: { value: "D", text: "how long to listen for agents (default 5s, at most 60s)" },
  // approve, deny.
  reason: { value: "TEXT", text: "why (the model sees a denial's reason)" },
  // viz.
  machine: { value: "chat|iteration|session|compaction", text: "the statechart (default chat)" },
  format: { value: "mermaid|json|svg", text: "the output format (default mermaid)" },
};

/** Each command's line of what it does and its two examples. */
export const COMMAND_HELP: Readonly<Record<string, CommandHelp>> = {
  up: {
    summary: "Run the agent host, the event logger and the web UI in one process.",
    examples: ["agentloop up", "agentloop up --port 0 --agents agents.json --db agentloop.db"],
  },
  serve: {
    summary: "Run the agent host alone on NATS: agents answer chat and control requests.",
    examples: [
      "agentloop serve",
      "agentloop serve --agents agents.json --history nats --nats nats://10.0.0.5:4222",
    ],
  },
  chat: {
    summary: "Send one message to an agent (through a host, or --local in this process).",
    examples: [
      'agentloop chat --local "what time is it?"',
      'agentloop chat --agent support --session s1 --events pretty "where is order 42?"',
    ],
  },
  tail: {
    summary: "Print every event matching a subject filter (the logging service).",
    examples: ["agentloop tail", "agentloop tail 'agentloop.events.*.s1.>' --since 10m --jsonl events.jsonl"],
  },
  ui: {
    summary: "Serve the web UI on its own, watching the bus.",
    examples: ["agentloop ui", 'agentloop ui --port 0 --host 0.0.0.0 --ui-token "$(openssl rand -hex 24)"'],
  },
  sessions: {
    summary: "List the live sessions of every host on the NATS system.",
    examples: ["agentloop sessions", "agentloop sessions --json --nats nats://10.0.0.5:4222"],
  },
  agents: {
    summary: "List every agent on the NATS system that speaks the Agent Protocol.",
    examples: ["agentloop agents", "agentloop agents --timeout 2s --json"],
  },
  viz: {
    summary: "Export a statechart.",
    examples: ["agentloop viz", "agentloop viz --machine iteration --format svg > iteration.svg"],
  },
  pending: {
    summary: "List the tool calls waiting for approval, on every host (from the event log).",
    examples: ["agentloop pending", "agentloop pending --agent support --json"],
  },
  approve: {
    summary: "Approve a held tool call (the id may be left out when only one waits).",
    examples: [
      "agentloop approve assistant s1",
      "agentloop approve support s1 call_1 --reason 'checked the order'",
    ],
  },
  deny: {
    summary: "Deny a held tool call; the model sees the denial and the reason.",
    examples: [
      "agentloop deny assistant s1",
      "agentloop deny support s1 call_1 --reason 'refunds need a manager'",
    ],
  },
};

/** The shared flags' names, shown once at the end of a command's help. */
export const SHARED_FLAG_SUMMARY =
  "Shared options: --provider --model --base-url --max-iterations --reasoning-effort --context-window " +
  "--stream-idle-timeout --nats --nats-creds --inbox-prefix --db --prefix (see agentloop --help)";

/**
 * `agentloop <name> --help`: summary, usage wrapped at {@link HELP_WIDTH}, the command's own
 * options (its flags minus the shared ones) with what they do, the shared ones named, examples.
 */
export function renderCommandHelp(
  name: string,
  usage: string,
  flags: readonly string[],
  sharedFlags: ReadonlySet<string>,
): string {
  const help = COMMAND_HELP[name];
  const lines: string[] = [];
  lines.push(...wrapWords(`agentloop ${name}: ${help?.summary ?? ""}`, HELP_WIDTH, ""), "");
  lines.push(...wrapUsage(`Usage: agentloop ${usage}`, HELP_WIDTH));
  const own = flags.filter((flag) => !sharedFlags.has(flag));
  if (own.length > 0) {
    lines.push("", "Options:");
    lines.push(...renderOptions(own));
  }
  lines.push("", ...wrapWords(SHARED_FLAG_SUMMARY, HELP_WIDTH, "  "));
  if (help !== undefined) {
    lines.push("", "Examples:", ...help.examples.map((example) => `  ${example}`));
  }
  return `${lines.join("\n")}\n`;
}

/** One option per entry: `  --name VALUE   what it does`, wrapped under its description column. */
export function renderOptions(flags: readonly string[]): string[] {
  const labels = flags.map((flag) => {
    const value = FLAG_HELP[flag]?.value;
    return `--${flag}${value === undefined ? "" : ` ${value}`}`;
  });
  const column = Math.min(28, Math.max(...labels.map((label) => label.length)) + 4);
  const lines: string[] = [];
  flags.forEach((flag, index) => {
    const label = `  ${labels[index]!}`;
    const text = FLAG_HELP[flag]?.text ?? "";
    const indent = " ".repeat(column);
    if (label.length + 2 > column) {
      lines.push(label);
      if (text !== "") lines.push(...wrapWords(text, HELP_WIDTH, indent));
      return;
    }
    const wrapped = wrapWords(text, HELP_WIDTH, indent);
    lines.push(`${label.padEnd(column)}${(wrapped[0] ?? "").trimStart()}`.trimEnd(), ...wrapped.slice(1));
  });
  return lines;
}

/**
 * A usage line broken at {@link HELP_WIDTH}: between bracketed groups (a `[--a X | --b Y]` group
 * stays whole), continuation lines indented under the first option.
 */
export function wrapUsage(usage: string, width: number): string[] {
  const tokens = usageTokens(usage);
  const head = tokens.findIndex((token) => token.startsWith("[") || token.startsWith("<"));
  const indent = " ".repeat(
    Math.min(24, tokens.slice(0, head === -1 ? tokens.length : head).join(" ").length + 1),
  );
  const lines: string[] = [];
  let line = "";
  for (const token of tokens) {
    if (line === "") line = token;
    else if (line.length + 1 + token.length <= width) line += ` ${token}`;
    else {
      lines.push(line);
      line = `${indent}${token}`;
    }
  }
  if (line !== "") lines.push(line);
  return lines;
}

/** Words wrapped at `width`, every line starting with `indent`. */
export function wrapWords(text: string, width: number, indent: string): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of text.split(/\s+/).filter((part) => part !== "")) {
    if (line === "") line = `${indent}${word}`;
    else if (line.length + 1 + word.length <= width) line += ` ${word}`;
    else {
      lines.push(line);
      line = `${indent}${word}`;
    }
  }
  if (line !== "") lines.push(line);
  return lines;
}

function usageTokens(usage: string): string[] {
  const tokens: string[] = [];
  let depth = 0;
  let current = "";
  for (const character of usage) {
    if (character === "[") depth += 1;
    if (character === "]") depth = Math.max(0, depth - 1);
    if (character === " " && depth === 0) {
      if (current !== "") tokens.push(current);
      current = "";
    } else current += character;
  }
  if (current !== "") tokens.push(current);
  return tokens;
}
