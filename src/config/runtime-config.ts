import { readFileSync } from "node:fs";
import { parseNatsUrl } from "../bus/nats-url.js";
import { knownContextWindow, type ProviderName, resolveProvider } from "../llm/create-backend.js";
import type { ReasoningEffort } from "../llm/types.js";
import { createSecretRedactor, type SecretRedactor } from "../text/secret-redactor.js";
import { isValidHostId } from "./host-id.js";
import { UsageError } from "./usage-error.js";

/**
 * The runtime configuration the CLI and the host share: provider settings and the shared flags,
 * resolved from flags, then the environment (given, never read here), then defaults:
 * the setting given for this run beats the one the shell carries.
 */

/** Provider settings and shared flags, resolved from flags, then env, then defaults. */
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
  /**
   * `--inbox-prefix` / `AGENTLOOP_INBOX_PREFIX`: the subject prefix of this process's reply inboxes
   * (nats.js's `inboxPrefix`; the client's default is `_INBOX`), so a NATS user's permissions can
   * name only `<prefix>.>` for its replies instead of every reply on the server.
   */
  natsInboxPrefix?: string;
  /** SQLite file (flag --db, env AGENTLOOP_DB); undefined = in memory. */
  db?: string;
  /** Subject prefix (flag --prefix, env AGENTLOOP_PREFIX, default "agentloop"). */
  prefix: string;
}

/** The model each provider uses when none is given. */
export const DEFAULT_MODELS: Record<RuntimeConfig["provider"], string> = {
  anthropic: "claude-sonnet-4-5",
  "openai-chat": "gpt-4o-mini",
  "openai-responses": "gpt-4.1-mini",
  demo: "demo",
};

export const DEFAULT_CONTEXT_WINDOW = 128_000;
export const DEFAULT_NATS_URL = "nats://127.0.0.1:4222";

type Flags = Record<string, string | boolean | undefined>;

function pick(flags: Flags, name: string, env: NodeJS.ProcessEnv, variable?: string): string | undefined {
  const flag = flags[name];
  if (typeof flag === "string" && flag.trim() !== "") return flag.trim();
  const value = variable ? env[variable] : undefined;
  return value !== undefined && value.trim() !== "" ? value.trim() : undefined;
}

/** Parses a positive integer option or says which option is wrong. */
export function positiveInteger(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || Number(value) < 1 || !Number.isSafeInteger(Number(value))) {
    throw new UsageError(`${option} must be a positive integer, got "${value}"`);
  }
  return Number(value);
}

export function parseReasoningEffort(value: string | undefined, option: string): ReasoningEffort | undefined {
  if (value === undefined) return undefined;
  if (value === "low" || value === "medium" || value === "high") return value;
  throw new UsageError(`${option} must be low, medium or high, got "${value}"`);
}

/** Flags first, then environment variables, then defaults: the most explicit setting wins. */
export function resolveRuntimeConfig(flags: Flags, env: NodeJS.ProcessEnv): RuntimeConfig {
  const provider = resolveProvider(env, { provider: pick(flags, "provider", env) });
  const model = pick(flags, "model", env, "AGENTLOOP_MODEL") ?? DEFAULT_MODELS[provider];
  const baseUrl =
    pick(flags, "base-url", env) ??
    (provider === "anthropic"
      ? env.ANTHROPIC_BASE_URL
      : provider === "demo"
        ? undefined
        : env.OPENAI_BASE_URL);
  const apiKey =
    provider === "anthropic" ? env.ANTHROPIC_API_KEY : provider === "demo" ? undefined : env.OPENAI_API_KEY;
  const maxIterations = positiveInteger(
    pick(flags, "max-iterations", env, "AGENTLOOP_MAX_ITERATIONS"),
    "--max-iterations",
  );
  const reasoningEffort = parseReasoningEffort(
    pick(flags, "reasoning-effort", env, "AGENTLOOP_REASONING_EFFORT"),
    "--reasoning-effort",
  );
  const contextWindow =
    positiveInteger(pick(flags, "context-window", env, "AGENTLOOP_CONTEXT_WINDOW"), "--context-window") ??
    knownContextWindow(model) ??
    DEFAULT_CONTEXT_WINDOW;
  const streamIdleTimeoutMs = timerDuration(
    pick(flags, "stream-idle-timeout", env, "AGENTLOOP_STREAM_IDLE_TIMEOUT"),
    "--stream-idle-timeout",
  );
  const natsCreds = pick(flags, "nats-creds", env, "NATS_CREDS");
  const natsInboxPrefix = inboxPrefixFrom(pick(flags, "inbox-prefix", env, "AGENTLOOP_INBOX_PREFIX"));
  const db = pick(flags, "db", env, "AGENTLOOP_DB");
  const prefix = pick(flags, "prefix", env, "AGENTLOOP_PREFIX") ?? "agentloop";
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(prefix)) {
    throw new UsageError(`--prefix must be NATS subject tokens (letters, digits, _ and -), got "${prefix}"`);
  }
  return {
    provider,
    model,
    ...(baseUrl && baseUrl.trim() !== "" ? { baseUrl: baseUrl.trim() } : {}),
    ...(apiKey && apiKey.trim() !== "" ? { apiKey: apiKey.trim() } : {}),
    ...(maxIterations !== undefined ? { maxIterations } : {}),
    ...(reasoningEffort !== undefined ? { reasoningEffort } : {}),
    contextWindow,
    ...(streamIdleTimeoutMs !== undefined ? { streamIdleTimeoutMs } : {}),
    natsUrl: pick(flags, "nats", env, "NATS_URL") ?? DEFAULT_NATS_URL,
    ...(natsCreds !== undefined ? { natsCreds } : {}),
    ...(natsInboxPrefix !== undefined ? { natsInboxPrefix } : {}),
    ...(db !== undefined ? { db } : {}),
    prefix,
  };
}

/**
 * `--inbox-prefix`: one or more dot-separated literal subject tokens (`_INBOX_alice`,
 * `acme.alice.inbox`). No wildcard, no `$` start (the server's own namespaces) and no whitespace:
 * the client appends `.<unique id>` to it for each inbox.
 */
export function inboxPrefixFrom(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(value)) {
    throw new UsageError(
      `--inbox-prefix must be NATS subject tokens (letters, digits, _ and -, separated by dots; no wildcards), got "${value}"`,
    );
  }
  return value;
}

/**
 * The secrets this process was given: the provider keys (the CLI's and both providers' key
 * variables, since agents of an agents file may use either), the NATS password or token of the
 * URL, and the seed of the NATS credentials file. Everything that leaves the process is redacted
 * with them ({@link secretRedactorFor}).
 */
export function configuredSecrets(config: RuntimeConfig, env: NodeJS.ProcessEnv): string[] {
  const secrets = [config.apiKey, env.ANTHROPIC_API_KEY, env.OPENAI_API_KEY];
  try {
    const address = parseNatsUrl(config.natsUrl);
    secrets.push(address.pass, address.token);
  } catch {
    // A bad URL holds no usable secret; connecting reports it.
  }
  if (config.natsCreds !== undefined) secrets.push(credentialsSeed(config.natsCreds));
  return [...new Set(secrets.filter((secret): secret is string => secret !== undefined && secret !== ""))];
}

/** The redactor for this process's {@link configuredSecrets}: built once, passed down. */
export function secretRedactorFor(config: RuntimeConfig, env: NodeJS.ProcessEnv): SecretRedactor {
  return createSecretRedactor(configuredSecrets(config, env));
}

/** The `USER NKEY SEED` block of a NATS credentials file (its JWT is not a secret on its own). */
function credentialsSeed(path: string): string | undefined {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return undefined; // Connecting reports an unreadable file.
  }
  return /-+BEGIN USER NKEY SEED-+\s*\r?\n\s*(\S+)/.exec(text)?.[1];
}

const DURATION_UNITS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/** Parses `500ms`, `90s`, `5m`, `12h`, `1d` into milliseconds, or says which option is wrong. */
export function parseDuration(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(value.trim());
  const milliseconds = match
    ? Number(match[1]) * DURATION_UNITS[match[2] as keyof typeof DURATION_UNITS]
    : Number.NaN;
  if (!(milliseconds > 0))
    throw new UsageError(`${option} must be a duration such as 90s, 30m or 12h, got "${value}"`);
  return milliseconds;
}

/** The longest delay a Node timer takes (about 24.8 days); a longer one would fire at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** {@link parseDuration} for a value that arms a timer: at most {@link MAX_TIMER_MS}. */
function timerDuration(value: string | undefined, option: string): number | undefined {
  const milliseconds = parseDuration(value, option);
  if (milliseconds !== undefined && milliseconds > MAX_TIMER_MS) {
    throw new UsageError(`${option} must be at most 24d, got "${value}"`);
  }
  return milliseconds === undefined ? undefined : Math.ceil(milliseconds);
}

/** The Agent Protocol's settings of `serve` / `up`: `--owner`, `--heartbeat`, `--keep-alive`, `--liveness-query`. */
export interface ProtocolSettings {
  owner?: string;
  heartbeatIntervalMs?: number;
  keepAliveMs?: number;
  /** A running chat asks its caller whether it still waits, this often (off when unset). */
  livenessQueryMs?: number;
}

/** `--owner` (AGENTLOOP_OWNER), `--heartbeat` (AGENTLOOP_HEARTBEAT), `--keep-alive` (AGENTLOOP_KEEP_ALIVE). */
export function protocolSettingsFrom(flags: Flags, env: NodeJS.ProcessEnv): ProtocolSettings {
  const owner = pick(flags, "owner", env, "AGENTLOOP_OWNER");
  if (owner !== undefined && !/^[A-Za-z0-9_-]{1,63}$/.test(owner)) {
    throw new UsageError(
      `--owner must be one subject token of letters, digits, _ and - (at most 63), got "${owner}"`,
    );
  }
  const heartbeatIntervalMs = timerDuration(
    pick(flags, "heartbeat", env, "AGENTLOOP_HEARTBEAT"),
    "--heartbeat",
  );
  const keepAliveMs = timerDuration(pick(flags, "keep-alive", env, "AGENTLOOP_KEEP_ALIVE"), "--keep-alive");
  const livenessQueryMs = timerDuration(
    pick(flags, "liveness-query", env, "AGENTLOOP_LIVENESS_QUERY"),
    "--liveness-query",
  );
  for (const [option, value] of [
    ["--heartbeat", heartbeatIntervalMs],
    ["--keep-alive", keepAliveMs],
    ["--liveness-query", livenessQueryMs],
  ] as const) {
    if (value !== undefined && value <= 0) throw new UsageError(`${option} must be more than 0`);
  }
  return {
    ...(owner === undefined ? {} : { owner }),
    ...(heartbeatIntervalMs === undefined ? {} : { heartbeatIntervalMs }),
    ...(keepAliveMs === undefined ? {} : { keepAliveMs }),
    ...(livenessQueryMs === undefined ? {} : { livenessQueryMs }),
  };
}

/** `--max-sessions` / `AGENTLOOP_MAX_SESSIONS`: how many sessions a host keeps live at most. */
export function maxSessionsFrom(flags: Flags, env: NodeJS.ProcessEnv): number | undefined {
  return positiveInteger(pick(flags, "max-sessions", env, "AGENTLOOP_MAX_SESSIONS"), "--max-sessions");
}

const BYTE_UNITS: Record<string, number> = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/** A size in bytes: a whole number, optionally with a binary unit (`k`, `m`, `g`; `512m`, `1GiB`). */
function byteSize(value: string | undefined, option: string): number | undefined {
  if (value === undefined) return undefined;
  const match = /^(\d+)\s*(?:([kmg])(?:i?b)?)?$/i.exec(value.trim());
  const unit = BYTE_UNITS[(match?.[2] ?? "").toLowerCase()];
  const bytes = match === null || unit === undefined ? Number.NaN : Number(match[1]) * unit;
  if (!Number.isSafeInteger(bytes) || bytes <= 0) {
    throw new UsageError(
      `${option} must be a number of bytes above 0, optionally with a unit (k, m, g: KiB, MiB, GiB), e.g. 512m; got "${value}"`,
    );
  }
  return bytes;
}

/** How much memory a host's sessions may hold: `--max-memory-bytes` in all, `--max-session-bytes` each. */
export interface MemoryLimits {
  maxMemoryBytes?: number;
  maxSessionBytes?: number;
}

/**
 * `--max-memory-bytes` / `AGENTLOOP_MAX_MEMORY_BYTES` (the live sessions' messages in all) and
 * `--max-session-bytes` / `AGENTLOOP_MAX_SESSION_BYTES` (one session's).
 */
export function memoryLimitsFrom(flags: Flags, env: NodeJS.ProcessEnv): MemoryLimits {
  const maxMemoryBytes = byteSize(
    pick(flags, "max-memory-bytes", env, "AGENTLOOP_MAX_MEMORY_BYTES"),
    "--max-memory-bytes",
  );
  const maxSessionBytes = byteSize(
    pick(flags, "max-session-bytes", env, "AGENTLOOP_MAX_SESSION_BYTES"),
    "--max-session-bytes",
  );
  return {
    ...(maxMemoryBytes === undefined ? {} : { maxMemoryBytes }),
    ...(maxSessionBytes === undefined ? {} : { maxSessionBytes }),
  };
}

/**
 * `--nats-hold-mb` / `AGENTLOOP_NATS_HOLD_MB`: how many MiB of events the NATS bus may hold while
 * the server is unreachable (in bytes; undefined for the bus's default).
 */
export function natsHoldBytesFrom(flags: Flags, env: NodeJS.ProcessEnv): number | undefined {
  const mebibytes = positiveInteger(
    pick(flags, "nats-hold-mb", env, "AGENTLOOP_NATS_HOLD_MB"),
    "--nats-hold-mb",
  );
  return mebibytes === undefined ? undefined : mebibytes * 1024 * 1024;
}

/** `--idle-timeout` / `AGENTLOOP_IDLE_TIMEOUT`: how long a session may stay idle before passivation. */
export function idleTimeoutFrom(flags: Flags, env: NodeJS.ProcessEnv): number | undefined {
  return parseDuration(pick(flags, "idle-timeout", env, "AGENTLOOP_IDLE_TIMEOUT"), "--idle-timeout");
}

/** How long a host goes without a request before it gives a burst's memory back (`--quiet-gc`). */
export const DEFAULT_QUIET_GC_MS = 10_000;

/**
 * `--quiet-gc D|off` / `AGENTLOOP_QUIET_GC` (default 10s): after this long with no request in
 * flight, a host that grew its heap during a burst runs full garbage collections, so V8 gives the
 * burst's pages back to the system. `off`: never (V8 collects by itself, but may keep those pages
 * for as long as the process stays quiet). Undefined: off.
 */
export function quietGcFrom(flags: Flags, env: NodeJS.ProcessEnv): number | undefined {
  const value = pick(flags, "quiet-gc", env, "AGENTLOOP_QUIET_GC");
  if (value === undefined) return DEFAULT_QUIET_GC_MS;
  if (value.toLowerCase() === "off") return undefined;
  const milliseconds = parseDuration(value, "--quiet-gc");
  if (milliseconds !== undefined && milliseconds < 1_000) {
    throw new UsageError(`--quiet-gc must be off or at least 1s, got ${milliseconds} ms`);
  }
  return milliseconds;
}

/**
 * `--max-chat-time` / `AGENTLOOP_MAX_CHAT_TIME` (e.g. `10m`): the longest a chat may run before it is
 * cancelled; the agents it asks get what is left of it. Undefined: no limit.
 */
export function maxChatTimeFrom(flags: Flags, env: NodeJS.ProcessEnv): number | undefined {
  return parseDuration(pick(flags, "max-chat-time", env, "AGENTLOOP_MAX_CHAT_TIME"), "--max-chat-time");
}

/** How far behind its event loop may run before `serve` and `up` refuse new chats (`--max-loop-delay`). */
export const DEFAULT_MAX_LOOP_DELAY_MS = 1_000;

/**
 * `--max-loop-delay` / `AGENTLOOP_MAX_LOOP_DELAY` (10ms to 1m; default 1s; `0` turns it off):
 * while the host's event loop runs further behind than this (smoothed over its last few turns),
 * it answers new chats `overloaded` (retryable) at once instead of taking more work than it can do.
 * Undefined: off.
 */
export function maxLoopDelayFrom(flags: Flags, env: NodeJS.ProcessEnv): number | undefined {
  const value = pick(flags, "max-loop-delay", env, "AGENTLOOP_MAX_LOOP_DELAY");
  if (value === undefined) return DEFAULT_MAX_LOOP_DELAY_MS;
  if (value.trim() === "0") return undefined;
  const milliseconds = parseDuration(value, "--max-loop-delay") ?? DEFAULT_MAX_LOOP_DELAY_MS;
  if (milliseconds < 10 || milliseconds > 60_000) {
    throw new UsageError(`--max-loop-delay must be from 10ms to 1m (or 0: off), got "${value}"`);
  }
  return Math.round(milliseconds);
}

/** Chats in progress on one host before `serve` and `up` refuse new ones (`--max-chats`). */
export const DEFAULT_MAX_CHATS = 1_000;

/**
 * `--max-chats` / `AGENTLOOP_MAX_CHATS` (default 1,000; `0` turns it off): chats in progress on
 * the host at most; past it new chats are answered `overloaded` (retryable) at once. Undefined: off.
 */
export function maxChatsFrom(flags: Flags, env: NodeJS.ProcessEnv): number | undefined {
  const value = pick(flags, "max-chats", env, "AGENTLOOP_MAX_CHATS");
  if (value === undefined) return DEFAULT_MAX_CHATS;
  if (value === "0") return undefined;
  return positiveInteger(value, "--max-chats");
}

/**
 * `--parent-lease` / `AGENTLOOP_PARENT_LEASE` (1s to 1h; default 30 s): how long a chat this host's
 * agents asked (`ask_agent`) runs on without hearing that its asker still waits.
 */
export function parentLeaseFrom(flags: Flags, env: NodeJS.ProcessEnv): number | undefined {
  const milliseconds = parseDuration(
    pick(flags, "parent-lease", env, "AGENTLOOP_PARENT_LEASE"),
    "--parent-lease",
  );
  if (milliseconds !== undefined && (milliseconds < 1_000 || milliseconds > 60 * 60 * 1000)) {
    throw new UsageError(`--parent-lease must be from 1s to 1h, got ${milliseconds} ms`);
  }
  return milliseconds === undefined ? undefined : Math.round(milliseconds);
}

/** Where a host keeps its sessions' histories: `sqlite` (the `--db` file, else memory) or `nats` (JetStream). */
export type HistoryBackendName = "sqlite" | "nats";

/** `--history sqlite|nats` / `AGENTLOOP_HISTORY` (default sqlite). */
export function historyBackendFrom(flags: Flags, env: NodeJS.ProcessEnv): HistoryBackendName {
  const value = pick(flags, "history", env, "AGENTLOOP_HISTORY") ?? "sqlite";
  if (value !== "sqlite" && value !== "nats") {
    throw new UsageError(`--history must be sqlite or nats, got "${value}"`);
  }
  return value;
}

/** `--host-id` / `AGENTLOOP_HOST_ID`: the host's id in events, heartbeats and `$SRV`; undefined for a generated one. */
export function hostIdFrom(flags: Flags, env: NodeJS.ProcessEnv): string | undefined {
  if (flags["host-id"] === true || flags["host-id"] === "") throw new UsageError("--host-id needs a value");
  const hostId = pick(flags, "host-id", env, "AGENTLOOP_HOST_ID");
  if (hostId !== undefined && !isValidHostId(hostId)) {
    throw new UsageError(
      `--host-id must be one subject token of letters, digits, _ and - (at most 128), got "${hostId}"`,
    );
  }
  return hostId;
}
