import { join, parse } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Bus } from "../bus/bus.js";
import { ensureEventStream } from "../bus/event-log.js";
import { NatsBus } from "../bus/nats-bus.js";
import { jetStreamName, tenantPrefix } from "../bus/subjects.js";
import { AgentRouting } from "../cluster/agent-routing.js";
import { SessionCluster, type SessionClusterOptions } from "../cluster/session-cluster.js";
import { leaseTiming } from "../cluster/session-lease.js";
import type { ResolvedAgentDefinition } from "../config/agent-definitions.js";
import { createHostId, isValidHostId } from "../config/host-id.js";
import type { HistoryBackendName, ProtocolSettings, RuntimeConfig } from "../config/runtime-config.js";
import { configuredSecrets } from "../config/runtime-config.js";
import type { TenantLimits } from "../config/tenant-limits.js";
import { NatsHistoryStore } from "../context/nats-history-store.js";
import { describeError } from "../errors/describe-error.js";
import type { AgentEvent } from "../events/types.js";
import type { ChatJournal } from "../journal/chat-journal.js";
import { JournalSweeper } from "../journal/journal-sweeper.js";
import { KvChatJournal } from "../journal/kv-chat-journal.js";
import { ResumeCounts } from "../journal/resume-counts.js";
import { ConfigurationError } from "../llm/configuration-error.js";
import type { ProviderEnvironment } from "../llm/create-backend.js";
import { McpServerPool } from "../mcp/mcp-server-pool.js";
import { AgentProtocolHost } from "../protocol/agent-protocol-host.js";
import { createSecretRedactor } from "../text/secret-redactor.js";
import { AgentHost, type RequestListener } from "./agent-host.js";
import { ContractService } from "./contract-service.js";
import { createSessionAgentFactory } from "./create-session-agent.js";
import { definitionSecrets } from "./definition-secrets.js";
import { checkHostPermissions, type StartPermissionWatch } from "./permission-check.js";
import { QuietCollector } from "./quiet-collector.js";
import { createRefusalLog } from "./refusal-log.js";
import { TenantHosts } from "./tenant-hosts.js";
import { TokenBudget } from "./token-budget.js";

export interface HostServiceOptions {
  bus: Bus;
  /**
   * Several hosts: a second connection to the same NATS server, for lease upkeep only (see
   * {@link SessionClusterOptions.leaseConnection}); the caller closes it after `close()`.
   * Default: the bus's connection.
   */
  leaseConnection?: NatsConnection;
  /**
   * Renew this host's own lease on a thread of its own, connecting with these settings (see
   * {@link SessionClusterOptions.leaseThread}). Default: on the main thread.
   */
  leaseThread?: SessionClusterOptions["leaseThread"];
  definitions: readonly ResolvedAgentDefinition[];
  config: RuntimeConfig;
  env?: ProviderEnvironment;
  /** One-line notices for the operator (stderr in the CLI). */
  log: (line: string) => void;
  /** Extra listener for every event (e.g. an in-process logger). */
  onEvent?: (event: AgentEvent) => void;
  /** Passed to the host (tests shorten them). */
  idleTimeoutMs?: number;
  /**
   * After this long with no request in flight on any of the process's hosts, a burst's memory is
   * given back with full garbage collections (`--quiet-gc`; see QuietCollector). Default: off.
   */
  quietCollectionMs?: number;
  /** The longest a chat may run (`--max-chat-time`); its asked agents get what is left. Default: no limit. */
  maxChatTimeMs?: number;
  /** Refuse new chats `overloaded` while the event loop runs this far behind (`--max-loop-delay`). Default: off. */
  maxLoopDelayMs?: number;
  /** Refuse new chats `overloaded` while this many are in progress on the host (`--max-chats`). Default: no limit. */
  maxChats?: number;
  /** How long a chat this host's agents asked runs on without hearing from them (`--parent-lease`, default 30 s). */
  parentLeaseMs?: number;
  maxSessions?: number;
  /** The live sessions' messages in memory, all together / each (`--max-memory-bytes`, `--max-session-bytes`). */
  maxMemoryBytes?: number;
  maxSessionBytes?: number;
  graceMs?: number;
  /** The Agent Protocol (NATS only): owner token and intervals. */
  protocol?: ProtocolSettings;
  /** This host's id (events' `host`, heartbeats, `$SRV` metadata). Default {@link createHostId}. */
  hostId?: string;
  /** Where the sessions' histories live: `sqlite` (default: `config.db`, else memory) or `nats` (JetStream; needs a NATS bus). */
  history?: HistoryBackendName;
  /** Several hosts: session lease TTL (`--lease-ttl`, default 10 s) and dedupe window (`--dedupe-window`). */
  leaseTtlMs?: number;
  /** Several hosts: the clock error tolerated between them (`--lease-skew`, default 500 ms or TTL/5 when less). */
  leaseSkewMs?: number;
  dedupeWindowMs?: number;
  /**
   * Sessions the journal sweeper resumes per second at most after a crash or a failover
   * (`--resume-rate`, default 50); sessions a client touches resume at once regardless.
   */
  resumesPerSecond?: number;
  /** Several hosts: how many shards the sessions are spread over (`--shards`, default 1024; equal on every host). */
  shards?: number;
  /**
   * `--js-replicas`: replicas of the streams and KV buckets this host creates (events, history,
   * sessions, replies, journal). Existing ones keep their settings. Default: the server's (1).
   */
  jsReplicas?: number;
  /** Limits per tenant (the agents file's `tenants` section): tenants not named here have none. */
  tenants?: Readonly<Record<string, TenantLimits>>;
}

/** A running agent host with what it holds open. */
export interface HostService {
  host: AgentHost;
  /** The id this host goes by. */
  readonly hostId: string;
  /** The tenants served so far (on `<prefix>.tenant.<tenant>.agents.…`). */
  tenants: TenantHosts;
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
  const env = options.env ?? {};
  // API keys and NATS credentials never leave in a tool result, an event, a reply or a log line.
  // So do the values the agents' settings hand to shell commands and MCP servers.
  const redactor = createSecretRedactor([
    ...configuredSecrets(config, env),
    ...definitionSecrets(options.definitions, env),
  ]);
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
  // A missing permission is named now, before anything is created, instead of failing silently later.
  const permissions =
    bus instanceof NatsBus
      ? await checkHostPermissions(bus, {
          prefix: config.prefix,
          agents: options.definitions.map((definition) => definition.name),
          usesJetStream: options.history === "nats" || bus.connection.info?.jetstream === true,
          historyOnNats: options.history === "nats",
        })
      : undefined;
  try {
    return await startOnBus(options, { env, redactor, log, hostId, replicas, permissions });
  } finally {
    permissions?.stop();
  }
}

async function startOnBus(
  options: HostServiceOptions,
  started: {
    env: ProviderEnvironment;
    redactor: ReturnType<typeof createSecretRedactor>;
    log: (line: string) => void;
    hostId: string;
    replicas: { replicas?: number };
    permissions: StartPermissionWatch | undefined;
  },
): Promise<HostService> {
  const { bus, config } = options;
  const { env, redactor, log, hostId, replicas } = started;
  const mcpServers = new McpServerPool(options.definitions, { env, log });
  const agentNames = options.definitions.map((definition) => definition.name);
  const tenantLimits = options.tenants ?? {};
  // The hosts started here (the main one and each tenant's), for the quiet collector.
  const liveHosts = new Set<AgentHost>();
  // One for the whole process: it is quiet only when none of its hosts has a request in flight or
  // a session at work.
  const quietCollector =
    options.quietCollectionMs === undefined
      ? undefined
      : new QuietCollector({
          quietMs: options.quietCollectionMs,
          isBusy: () => [...liveHosts].some((live) => live.sessions.hasBusySession),
          log,
        });

  /**
   * Everything that serves one prefix: the untenanted `<prefix>` or a tenant's
   * `<prefix>.tenant.<tenant>`. Each has its own histories, journal, leases, stored replies and
   * sessions, so nothing of one is reachable from another.
   */
  const startUnit = async (
    prefix: string,
    unit: {
      listen?: RequestListener;
      db?: string;
      maxSessions?: number;
      budget?: TokenBudget;
      /** Opened already (the untenanted prefix's, so a refused stream fails the start first). */
      histories?: NatsHistoryStore;
    },
  ) => {
    const histories =
      unit.histories ??
      (options.history === "nats" ? await openNatsHistories(bus, prefix, replicas) : undefined);
    // Shared histories need a shared journal: the next owner of a session resumes from it.
    const sharedJournal =
      histories !== undefined && bus instanceof NatsBus
        ? await KvChatJournal.open(bus.connection, { bucket: jetStreamName(prefix, "JOURNAL"), ...replicas })
        : undefined;
    const { budget } = unit;
    // A tenant that keeps asking past its budget is logged once a minute, not once a chat.
    const refused = createRefusalLog(log);
    const factory = createSessionAgentFactory({
      definitions: options.definitions,
      ...(options.parentLeaseMs === undefined ? {} : { askAgent: { parentLeaseMs: options.parentLeaseMs } }),
      bus,
      prefix,
      redactor,
      // The shell reads the variables it passes on from the same environment as the providers.
      shell: { env, log },
      ...(unit.db === undefined ? {} : { db: unit.db }),
      ...(histories === undefined
        ? {}
        : { openHistory: (agent, session) => histories.history(agent, session) }),
      ...(sharedJournal === undefined ? {} : { journal: sharedJournal }),
      hostId,
      env,
      ...(budget === undefined
        ? {}
        : {
            checkBudget: () => {
              const verdict = budget.check();
              if (verdict.isExceeded)
                refused("token-budget", `refused a chat of tenant "${budget.tenant}": ${verdict.reason}`);
              return verdict;
            },
          }),
      ...(options.onEvent === undefined && budget === undefined
        ? {}
        : {
            onEvent: (event: AgentEvent) => {
              budget?.record(event);
              options.onEvent?.(event);
            },
          }),
      log,
      mcpServers,
    });
    let host: AgentHost | undefined;
    // On NATS with JetStream, sessions are leased so several hosts can share the agents.
    let cluster: SessionCluster | undefined;
    if (bus instanceof NatsBus) {
      const started = await SessionCluster.startOrExplain({
        connection: bus.connection,
        ...(options.leaseConnection === undefined ? {} : { leaseConnection: options.leaseConnection }),
        ...(options.leaseThread === undefined ? {} : { leaseThread: options.leaseThread }),
        prefix,
        hostId,
        timing: leaseTiming(options.leaseTtlMs, options.leaseSkewMs),
        ...replicas,
        ...(options.dedupeWindowMs === undefined ? {} : { dedupeWindowMs: options.dedupeWindowMs }),
        ...(options.shards === undefined ? {} : { shardCount: options.shards }),
        agents: options.definitions.map((definition) => definition.name),
        log,
      });
      if (started instanceof SessionCluster) cluster = started;
      else
        log(
          `no session leases (JetStream KV): ${started.unavailable}; run one host only on this NATS system`,
        );
    }
    // Shared by the session factory and the sweeper: what woke each resumed session.
    const resumeCounts = new ResumeCounts();
    try {
      host = new AgentHost({
        bus,
        prefix,
        agents: agentNames,
        createAgent: factory.createAgent,
        hostId,
        resumeCounts,
        log,
        ...(cluster === undefined ? {} : { cluster }),
        ...(bus instanceof NatsBus ? { routing: new AgentRouting(bus.connection, prefix) } : {}),
        ...(options.idleTimeoutMs === undefined ? {} : { idleTimeoutMs: options.idleTimeoutMs }),
        ...(quietCollector === undefined ? {} : { quietCollector }),
        ...(options.maxChatTimeMs === undefined ? {} : { maxChatTimeMs: options.maxChatTimeMs }),
        ...(options.maxLoopDelayMs === undefined ? {} : { maxLoopDelayMs: options.maxLoopDelayMs }),
        ...(options.maxChats === undefined ? {} : { maxChats: options.maxChats }),
        ...(unit.maxSessions === undefined ? {} : { maxSessions: unit.maxSessions }),
        ...(options.maxMemoryBytes === undefined ? {} : { maxMemoryBytes: options.maxMemoryBytes }),
        ...(options.maxSessionBytes === undefined ? {} : { maxSessionBytes: options.maxSessionBytes }),
        ...(options.graceMs === undefined ? {} : { graceMs: options.graceMs }),
        ...(unit.listen === undefined ? {} : { listen: unit.listen }),
      }).start();
    } catch (error) {
      await cluster?.close();
      factory.close();
      throw error;
    }
    const startedHost = host;
    liveHosts.add(startedHost);
    // Resume after a crash: what this host's last life (or, with leases, a dead host) left unfinished goes on now,
    // without a new message: sessions with a journal entry and no live owner are activated here.
    const journal: ChatJournal | undefined = factory.journal;
    const sweeper =
      journal === undefined
        ? undefined
        : new JournalSweeper({
            journal,
            sessions: startedHost.sessions,
            agents: agentNames,
            counts: resumeCounts,
            ...(options.resumesPerSecond === undefined
              ? {}
              : { maxResumesPerSecond: options.resumesPerSecond }),
            ...(cluster === undefined
              ? {}
              : { ownership: cluster, intervalMs: Math.max(250, leaseTiming(options.leaseTtlMs).ttlMs / 3) }),
            log,
          });
    return {
      host: startedHost,
      factory,
      sweeper,
      close: async (closeOptions: { hurry?: AbortSignal } = {}) => {
        sweeper?.close();
        await startedHost.close(closeOptions);
        liveHosts.delete(startedHost);
        factory.close();
      },
    };
  };

  // A JetStream history that cannot be opened ends the start before anything else is said or made.
  const mainHistories =
    options.history === "nats" ? await openNatsHistories(bus, config.prefix, replicas) : undefined;
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
  let main: Awaited<ReturnType<typeof startUnit>> | undefined;
  let tenants: TenantHosts | undefined;
  let protocol: AgentProtocolHost | undefined;
  try {
    contract =
      bus instanceof NatsBus
        ? await ContractService.start(bus, {
            prefix: config.prefix,
            hostId,
            log,
            statsData: () => ({
              eventPublishFailures: main?.factory.eventPublishFailures ?? 0,
              permissionErrors: bus.permissionErrors,
            }),
          })
        : undefined;
    main = await startUnit(config.prefix, {
      ...(mainHistories === undefined ? {} : { histories: mainHistories }),
      ...(config.db === undefined ? {} : { db: config.db }),
      ...(options.maxSessions === undefined ? {} : { maxSessions: options.maxSessions }),
      ...(contract === undefined ? {} : { listen: contract.listen }),
    });
    // Tenants (NATS accounts importing `<prefix>.tenant.<tenant>.agents.>`) need no list here:
    // each is served from its first request on.
    tenants = new TenantHosts({
      bus,
      prefix: config.prefix,
      queueGroup: `${config.prefix.replace(/\./g, "_")}_host`,
      ...(contract === undefined ? {} : { listen: contract.listen }),
      log,
      createUnit: (tenant, listen) => {
        const limits = tenantLimits[tenant];
        return startUnit(tenantPrefix(config.prefix, tenant), {
          listen,
          ...(config.db === undefined ? {} : { db: tenantDatabasePath(config.db, tenant) }),
          ...(limits?.maxSessions === undefined ? {} : { maxSessions: limits.maxSessions }),
          ...(limits?.tokenBudget === undefined
            ? {}
            : { budget: new TokenBudget(tenant, limits.tokenBudget) }),
        });
      },
    }).start();
  } catch (error) {
    // No server process may outlive a host that did not start.
    await main?.close();
    await contract?.stop();
    await mcpServers.close();
    throw error;
  }
  const { host } = main;
  const startedFactory = main.factory;
  if (bus instanceof NatsBus) {
    try {
      const selfApproving = new Set(
        options.definitions.filter((definition) => definition.selfApprove === true).map(({ name }) => name),
      );
      protocol = await AgentProtocolHost.start({
        connection: bus.connection,
        host,
        canSelfApprove: (agent) => selfApproving.has(agent),
        sessionExists: (agent, session) => startedFactory.hasSession(agent, session),
        log,
        ...options.protocol,
      });
    } catch (error) {
      await tenants.close();
      await main.close();
      await contract?.stop();
      await mcpServers.close();
      throw error;
    }
  }
  const startedMain = main;
  const startedTenants = tenants;
  const close = async (closeOptions: { hurry?: AbortSignal } = {}): Promise<void> => {
    // No new prompts; running ones end with the host's sessions (answered, or cancelled after the grace).
    await protocol?.stop();
    await Promise.all([startedMain.close(closeOptions), startedTenants.close(closeOptions)]);
    await protocol?.drained();
    await contract?.stop();
    await mcpServers.close();
    quietCollector?.close();
  };
  // Everything is subscribed: a subscription the server refused is named now (a needed one fails
  // the start; the `$SRV` and Agent Protocol extras are logged and the host serves without them).
  try {
    await started.permissions?.finish(log);
  } catch (error) {
    await close();
    throw error;
  }
  const resumed = main.sweeper?.start() ?? Promise.resolve(0);
  return {
    host,
    tenants: startedTenants,
    hostId,
    protocol,
    resumed,
    close,
  };
}

/** A tenant's SQLite file next to the host's: `chats.db` → `chats.tenant-<tenant>.db`. */
export function tenantDatabasePath(db: string, tenant: string): string {
  const { dir, name, ext } = parse(db);
  return join(dir, `${name}.tenant-${tenant}${ext}`);
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
  // An agent given its own backend (a config file's `backend`) runs that, whatever the provider says.
  const isDemoAgent = (definition: ResolvedAgentDefinition) =>
    definition.backend === undefined
      ? definition.provider === "demo"
      : definition.backend.provider === "demo";
  const names = definitions.map((definition) => {
    let model: string;
    if (isDemoAgent(definition)) model = "demo model";
    else if (definition.backend !== undefined) model = `its own ${definition.backend.provider} backend`;
    else model = `${definition.provider} ${definition.model}`;
    return `${definition.name} (${model})`;
  });
  const isDemo = definitions.some(isDemoAgent);
  return `${names.join(", ")}${isDemo ? " — the demo model is offline and deterministic: set ANTHROPIC_API_KEY or OPENAI_API_KEY for a real one" : ""}`;
}
