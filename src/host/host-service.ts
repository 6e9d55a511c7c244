import type { Bus } from "../bus/bus.js";
import { ensureEventStream } from "../bus/event-log.js";
import { NatsBus } from "../bus/nats-bus.js";
import { jetStreamName } from "../bus/subjects.js";
import { AgentRouting } from "../cluster/agent-routing.js";
import { SessionCluster } from "../cluster/session-cluster.js";
import { leaseTiming } from "../cluster/session-lease.js";
import type { ResolvedAgentDefinition } from "../config/agent-definitions.js";
import { createHostId, isValidHostId } from "../config/host-id.js";
import { processEnvironment } from "../config/process-environment.js";
import type { HistoryBackendName, ProtocolSettings, RuntimeConfig } from "../config/runtime-config.js";
import { secretRedactorFor } from "../config/runtime-config.js";
import { NatsHistoryStore } from "../context/nats-history-store.js";
import { describeError } from "../errors/describe-error.js";
import type { AgentEvent } from "../events/types.js";
import type { ChatJournal } from "../journal/chat-journal.js";
import { JournalSweeper } from "../journal/journal-sweeper.js";
import { KvChatJournal } from "../journal/kv-chat-journal.js";
import { ConfigurationError } from "../llm/configuration-error.js";
import type { ProviderEnvironment } from "../llm/create-backend.js";
import { McpServerPool } from "../mcp/mcp-server-pool.js";
import { AgentProtocolHost } from "../protocol/agent-protocol-host.js";
import { AgentHost } from "./agent-host.js";
import { ContractService } from "./contract-service.js";
import { createSessionAgentFactory } from "./create-session-agent.js";

export interface HostServiceOptions {
  bus: Bus;
  definitions: readonly ResolvedAgentDefinition[];
  config: RuntimeConfig;
  env?: ProviderEnvironment;
  /** One-line notices for the operator (stderr in the CLI). */
  log: (line: string) => void;
  /** Extra listener for every event (e.g. an in-process logger). */
  onEvent?: (event: AgentEvent) => void;
  /** Passed to the host (tests shorten them). */
  idleTimeoutMs?: number;
  maxSessions?: number;
  graceMs?: number;
  /** The Agent Protocol (NATS only): owner token and intervals. */
  protocol?: ProtocolSettings;
  /** This host's id (events' `host`, heartbeats, `$SRV` metadata). Default {@link createHostId}. */
  hostId?: string;
  /** Where the sessions' histories live: `sqlite` (default: `config.db`, else memory) or `nats` (JetStream; needs a NATS bus). */
  history?: HistoryBackendName;
  /** Issue 11: session lease TTL (`--lease-ttl`, default 10 s) and dedupe window (`--dedupe-window`). */
  leaseTtlMs?: number;
  dedupeWindowMs?: number;
  /**
   * `--js-replicas`: replicas of the streams and KV buckets this host creates (events, history,
   * sessions, replies, journal). Existing ones keep their settings. Default: the server's (1).
   */
  jsReplicas?: number;
}

/** A running agent host with what it holds open. */
export interface HostService {
  host: AgentHost;
  /** The id this host goes by. */
  readonly hostId: string;
  /** The Agent Protocol side (undefined on the in-process bus: there is no `$SRV` there). */
  protocol: AgentProtocolHost | undefined;
  /** Resolves with how many journaled sessions were resumed at start, once their chats ran. */
  resumed: Promise<number>;
  /**
   * Graceful: running chats finish (up to the grace period, or until `hurry` aborts: then they are
   * cancelled and their callers answered `cancelled`), then the history database closes.
   */
  close(options?: { hurry?: AbortSignal }): Promise<void>;
}

/**
 * What `serve` and `up` share: the session factory (providers and ToolSets checked now, so a bad
 * configuration fails at start), the JetStream event log when the bus is NATS (so `tail --since`
 * can replay; a server without JetStream only costs the log), and the host itself.
 *
 * @throws ConfigurationError when an agent's provider cannot be built.
 */
export async function startHostService(options: HostServiceOptions): Promise<HostService> {
  const { bus, config } = options;
  const env = options.env ?? processEnvironment();
  // API keys and NATS credentials never leave in a tool result, an event, a reply or a log line.
  const redactor = secretRedactorFor(config, env);
  const log = (line: string) => options.log(redactor.redact(line));
  // One client per MCP server for the whole host; a server's own environment comes from `env`.
  if (options.hostId !== undefined && !isValidHostId(options.hostId)) {
    throw new ConfigurationError(
      `host id "${options.hostId}" is not one subject token of letters, digits, _ and - (at most 128)`,
    );
  }
  const hostId = options.hostId ?? createHostId();
  // Only what this host creates gets them: a stream or bucket that exists keeps its settings.
  const replicas = options.jsReplicas === undefined ? {} : { replicas: options.jsReplicas };
  const histories =
    options.history === "nats" ? await openNatsHistories(bus, config.prefix, replicas) : undefined;
  // Shared histories need a shared journal: the next owner of a session resumes from it.
  const sharedJournal =
    histories !== undefined && bus instanceof NatsBus
      ? await KvChatJournal.open(bus.connection, {
          bucket: jetStreamName(config.prefix, "JOURNAL"),
          ...replicas,
        })
      : undefined;
  const mcpServers = new McpServerPool(options.definitions, { env, log });
  const factory = createSessionAgentFactory({
    definitions: options.definitions,
    bus,
    prefix: config.prefix,
    redactor,
    // The shell reads the variables it passes on from the same environment as the providers.
    shell: { env },
    ...(config.db === undefined ? {} : { db: config.db }),
    ...(histories === undefined
      ? {}
      : { openHistory: (agent, session) => histories.history(agent, session) }),
    ...(sharedJournal === undefined ? {} : { journal: sharedJournal }),
    hostId,
    env,
    ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
    log,
    mcpServers,
  });
  // Servers that cannot start are logged and retried: the host serves without their tools meanwhile.
  await mcpServers.start();
  if (bus instanceof NatsBus) {
    try {
      await ensureEventStream(bus.connection, { prefix: config.prefix, ...replicas });
    } catch (error) {
      const reason = describeError(error);
      log(`no event log (JetStream): ${reason}; events are still published, tail --since cannot replay them`);
    }
  }
  // On NATS our own contract is a `$SRV` micro service (`agentloop`); in process, plain subscriptions.
  let contract: ContractService | undefined;
  let host: AgentHost | undefined;
  let protocol: AgentProtocolHost | undefined;
  // Issue 11: on NATS with JetStream, sessions are leased so several hosts can share the agents.
  let cluster: SessionCluster | undefined;
  if (bus instanceof NatsBus) {
    const started = await SessionCluster.startOrExplain({
      connection: bus.connection,
      prefix: config.prefix,
      hostId,
      timing: leaseTiming(options.leaseTtlMs),
      ...replicas,
      ...(options.dedupeWindowMs === undefined ? {} : { dedupeWindowMs: options.dedupeWindowMs }),
      stateOf: (agent, session) => {
        const actor = host?.sessions.find(agent, session);
        return actor === undefined ? undefined : actor.isIdle ? "idle" : "busy";
      },
      log,
    });
    if (started instanceof SessionCluster) cluster = started;
    else
      log(`no session leases (JetStream KV): ${started.unavailable}; run one host only on this NATS system`);
  }
  try {
    contract =
      bus instanceof NatsBus
        ? await ContractService.start(bus, {
            prefix: config.prefix,
            hostId,
            log,
            statsData: () => ({ eventPublishFailures: factory.eventPublishFailures }),
          })
        : undefined;
    host = new AgentHost({
      bus,
      prefix: config.prefix,
      agents: options.definitions.map((definition) => definition.name),
      createAgent: factory.createAgent,
      hostId,
      log,
      ...(cluster === undefined ? {} : { cluster }),
      ...(bus instanceof NatsBus ? { routing: new AgentRouting(bus.connection, config.prefix) } : {}),
      ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }),
      ...(options.maxSessions === undefined ? {} : { maxSessions: options.maxSessions }),
      ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
      ...(contract === undefined ? {} : { listen: contract.listen }),
    }).start();
  } catch (error) {
    // No server process may outlive a host that did not start.
    await contract?.stop();
    await mcpServers.close();
    factory.close();
    throw error;
  }
  if (bus instanceof NatsBus) {
    try {
      protocol = await AgentProtocolHost.start({ connection: bus.connection, host, ...options.protocol });
    } catch (error) {
      await host.close();
      await contract?.stop();
      await mcpServers.close();
      factory.close();
      throw error;
    }
  }
  // Issue 11: what this host's last life (or, with leases, a dead host) left unfinished goes on now,
  // without a new message: sessions with a journal entry and no live owner are activated here.
  const journal: ChatJournal | undefined = factory.journal;
  const sweeper =
    journal === undefined
      ? undefined
      : new JournalSweeper({
          journal,
          sessions: host.sessions,
          agents: options.definitions.map((definition) => definition.name),
          ...(cluster === undefined
            ? {}
            : { ownership: cluster, intervalMs: Math.max(250, leaseTiming(options.leaseTtlMs).ttlMs / 3) }),
          log,
        });
  const resumed = sweeper?.start() ?? Promise.resolve(0);
  return {
    host,
    hostId,
    protocol,
    resumed,
    close: async (closeOptions = {}) => {
      // No new prompts; running ones end with the host's sessions (answered, or cancelled after the grace).
      sweeper?.close();
      await protocol?.stop();
      await host.close(closeOptions);
      await protocol?.drained();
      await contract?.stop();
      await mcpServers.close();
      factory.close();
    },
  };
}

/**
 * The JetStream history store for `--history nats` (its stream made sure of now, so a server
 * without JetStream fails the start, not the first chat).
 * @throws ConfigurationError when the bus is not NATS or JetStream is not available.
 */
async function openNatsHistories(
  bus: Bus,
  prefix: string,
  replicas: { replicas?: number },
): Promise<NatsHistoryStore> {
  if (!(bus instanceof NatsBus)) {
    throw new ConfigurationError(
      "the JetStream history (--history nats) needs a NATS bus, not the in-process bus",
    );
  }
  try {
    return await NatsHistoryStore.open(bus.connection, { prefix, ...replicas });
  } catch (error) {
    const reason = describeError(error);
    throw new ConfigurationError(
      `--history nats: cannot open the JetStream history stream: ${reason} (start nats-server with -js)`,
      { cause: error },
    );
  }
}

/** `bot, helper (demo model: offline and deterministic)`: the agents line `serve` and `up` print. */
export function describeAgents(definitions: readonly ResolvedAgentDefinition[]): string {
  const names = definitions.map((definition) => {
    const model =
      definition.provider === "demo" ? "demo model" : `${definition.provider} ${definition.model}`;
    return `${definition.name} (${model})`;
  });
  const isDemo = definitions.some((definition) => definition.provider === "demo");
  return `${names.join(", ")}${isDemo ? " — the demo model is offline and deterministic: set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one" : ""}`;
}
