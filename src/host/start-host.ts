import type { Bus } from "../bus/bus.js";
import { DEFAULT_PREFIX } from "../bus/subjects.js";
import { MAX_SHARDS, MIN_SHARDS } from "../cluster/shard-map.js";
import type { AgentConfig } from "../config/agent-config.js";
import { parseConfig } from "../config/load-config-file.js";
import type { RuntimeConfig } from "../config/runtime-config.js";
import { DEFAULT_MODELS, resolveRuntimeConfig } from "../config/runtime-config.js";
import { UsageError } from "../config/usage-error.js";
import { ConfigurationError } from "../errors/configuration-error.js";
import type { AgentEvent } from "../events/types.js";
import { createHostToolSetRegistry } from "./create-session-agent.js";
import { startHostService } from "./host-service.js";

/** What {@link startHost} takes. */
export interface StartHostOptions {
  /** Where the host answers (`<prefix>.agents.<agent>.chat` / `.control`) and publishes events. */
  bus: Bus;
  /** The agents to serve, as in a config file (`defineConfig`): names unique, at least one. */
  agents: readonly AgentConfig[];
  /** Subject prefix. @defaultValue `"agentloop"` */
  prefix?: string;
  /** SQLite file of the conversation histories. @defaultValue none: histories live in this process's memory */
  db?: string;
  /**
   * `"nats"`: the histories live in JetStream (stream `AGENTLOOP_HISTORY`), shared by every host on
   * the bus; needs a NatsBus. `"sqlite"`: in `db`.
   * @defaultValue `"sqlite"`
   */
  history?: "sqlite" | "nats";
  /** This host's id, carried by every event as `host`. @defaultValue host name, pid and a random suffix */
  hostId?: string;
  /** Several hosts on one NATS system: the session lease TTL, as `--lease-ttl` (300 ms – 1 h). @defaultValue 10_000 */
  leaseTtlMs?: number;
  /** Several hosts on one NATS system: how many shards sessions are spread over, as `--shards` (equal on every host). @defaultValue 1024 */
  shards?: number;
  /** How long the reply to a chat `id` is kept for retries, as `--dedupe-window`. @defaultValue 600_000 */
  dedupeWindowMs?: number;
  /** Replicas of the JetStream streams and buckets this host creates (1–5), as `--js-replicas`. @defaultValue 1 */
  jsReplicas?: number;
  /**
   * Where provider keys, base URLs and defaults are read, as the CLI reads them
   * (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `AGENTLOOP_PROVIDER`, `AGENTLOOP_MODEL`…). Pass
   * `process.env` to use the process's: the library reads no environment it is not handed.
   * @defaultValue none
   */
  env?: NodeJS.ProcessEnv;
  /** One-line notices (a session that failed to start, no JetStream event log). @defaultValue none */
  log?: (line: string) => void;
  /** Called with every event, besides publishing it on the bus. @defaultValue none */
  onEvent?: (event: AgentEvent) => void;
  /** Idle sessions are passivated (their memory freed; the next message restores them) after this long. @defaultValue 43_200_000 (12 h) */
  idleTimeoutMs?: number;
  /** The longest a chat may run, then it is cancelled; the agents it asks get what is left. @defaultValue no limit */
  maxChatTimeMs?: number;
  /**
   * While the event loop runs further behind than this (ms, smoothed), new chats are refused with a
   * retryable `overloaded` instead of piling up. @defaultValue off
   */
  maxLoopDelayMs?: number;
  /** Chats in progress at most; past it new chats are refused with a retryable `overloaded`. @defaultValue no limit */
  maxChats?: number;
  /** How long a chat these agents asked runs on without hearing that its asker still waits. @defaultValue 30 s */
  parentLeaseMs?: number;
  /** Live sessions at most; past it a new session is refused with `overloaded`. @defaultValue 10_000 */
  maxSessions?: number;
  /**
   * Bytes the live sessions' messages may hold in memory in all; over it idle sessions are
   * passivated, and with none idle a chat gets `overloaded`.
   * @defaultValue 512 MiB, or half of Node's heap limit when that is less
   */
  maxMemoryBytes?: number;
  /** Bytes one session's messages may hold: over it the session is compacted before its next chat. @defaultValue no limit */
  maxSessionBytes?: number;
  /** How long `close()` lets running chats finish before cancelling them. @defaultValue 30_000 */
  graceMs?: number;
}

/** A host started by {@link startHost}. */
export interface RunningHost {
  /** The names of the agents it serves. */
  readonly agents: readonly string[];
  /**
   * Stops taking requests, lets running chats finish (up to `graceMs`), then closes the history
   * database. The bus stays open: it is the caller's.
   */
  close(): Promise<void>;
}

/**
 * Starts an agent host on `bus` (what `agentloop serve` runs): each agent answers
 * chat and control requests on its subjects (`<prefix>.agents.<agent>.chat` / `.control`), one
 * actor per session, and publishes its events. Works on a `NatsBus` (other processes reach the
 * agents) or a `LocalBus` (this process only). The agents are configured as in a config file; a
 * provider's key is read from `options.env`.
 *
 * @param options The bus, the agents, and the host's limits and storage.
 * @returns The running host; `close()` it before closing the bus, which stays the caller's.
 *
 * @example
 * ```ts
 * import { defineTool, NatsBus, startHost, z } from "agentloop";
 *
 * const lookup = defineTool({
 *   name: "lookup",
 *   description: "Looks a word up.",
 *   parameters: z.object({ word: z.string() }),
 *   execute: ({ word }) => `${word}: a word`,
 * });
 * const bus = await NatsBus.connect({ url: "nats://127.0.0.1:4222" });
 * const host = await startHost({
 *   bus,
 *   agents: [{ name: "helper", provider: "anthropic", model: "claude-sonnet-4-5", tools: [lookup, "current_time"] }],
 *   db: "chats.db",
 *   env: process.env, // where ANTHROPIC_API_KEY is read
 *   log: (line) => console.error(line),
 * });
 * process.once("SIGTERM", async () => {
 *   await host.close(); // lets running chats finish (graceMs), then stops
 *   await bus.close();
 * });
 * ```
 *
 * On a NatsBus it first checks the NATS user's permissions (an empty probe message per publish
 * family, its reply inbox, JetStream's API; see docs/security-nats-roles.md).
 *
 * @throws ConfigurationError naming the field (`startHost: agents[0].tools[1]: …`) for a bad
 *   agent, or when a provider cannot be built (e.g. no API key).
 * @throws NatsPermissionError (a BusConfigError) naming each subject the NATS user may not use
 *   and the allow entry to grant.
 */
export async function startHost(options: StartHostOptions): Promise<RunningHost> {
  const env = options.env ?? {};
  checkWholeNumber("leaseTtlMs", options.leaseTtlMs, 300, 60 * 60 * 1000);
  checkWholeNumber("dedupeWindowMs", options.dedupeWindowMs, 1_000, 7 * 24 * 60 * 60 * 1000);
  checkWholeNumber("jsReplicas", options.jsReplicas, 1, 5);
  checkWholeNumber("shards", options.shards, MIN_SHARDS, MAX_SHARDS);
  checkWholeNumber("parentLeaseMs", options.parentLeaseMs, 1_000, 60 * 60 * 1000);
  let config: RuntimeConfig;
  let definitions: ReturnType<typeof parseConfig>;
  try {
    // The CLI's defaults and environment, minus what only the CLI decides (the bus, its prefix, the database).
    const { db: _db, prefix: _prefix, ...defaults } = resolveRuntimeConfig({}, env);
    config = {
      ...defaults,
      prefix: options.prefix ?? DEFAULT_PREFIX,
      ...(options.db === undefined ? {} : { db: options.db }),
    };
    definitions = parseConfig({ agents: options.agents }, config, {
      knownTools: createHostToolSetRegistry().names(),
      defaultModel: (provider) => DEFAULT_MODELS[provider],
    });
  } catch (error) {
    if (!(error instanceof ConfigurationError || error instanceof UsageError)) throw error;
    throw new ConfigurationError(`startHost: ${error.message}`, { cause: error });
  }
  const service = await startHostService({
    bus: options.bus,
    definitions,
    config,
    env,
    log: options.log ?? (() => {}),
    ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
    ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }),
    ...(options.maxChatTimeMs === undefined ? {} : { maxChatTimeMs: options.maxChatTimeMs }),
    ...(options.maxLoopDelayMs === undefined ? {} : { maxLoopDelayMs: options.maxLoopDelayMs }),
    ...(options.maxChats === undefined ? {} : { maxChats: options.maxChats }),
    ...(options.parentLeaseMs === undefined ? {} : { parentLeaseMs: options.parentLeaseMs }),
    ...(options.maxSessions === undefined ? {} : { maxSessions: options.maxSessions }),
    ...(options.maxMemoryBytes === undefined ? {} : { maxMemoryBytes: options.maxMemoryBytes }),
    ...(options.maxSessionBytes === undefined ? {} : { maxSessionBytes: options.maxSessionBytes }),
    ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
    ...(options.hostId === undefined ? {} : { hostId: options.hostId }),
    ...(options.history === undefined ? {} : { history: options.history }),
    ...(options.leaseTtlMs === undefined ? {} : { leaseTtlMs: options.leaseTtlMs }),
    ...(options.dedupeWindowMs === undefined ? {} : { dedupeWindowMs: options.dedupeWindowMs }),
    ...(options.jsReplicas === undefined ? {} : { jsReplicas: options.jsReplicas }),
    ...(options.shards === undefined ? {} : { shards: options.shards }),
  });
  return { agents: definitions.map((definition) => definition.name), close: service.close };
}

/** The same bounds as the CLI's flags (`--lease-ttl`, `--dedupe-window`, `--js-replicas`). */
function checkWholeNumber(name: string, value: number | undefined, min: number, max: number): void {
  if (value === undefined) return;
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new ConfigurationError(
      `startHost: ${name} must be a whole number from ${min} to ${max}, got ${value}`,
    );
  }
}
