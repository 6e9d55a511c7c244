import type { Bus } from "../bus/bus.js";
import { ensureEventStream } from "../bus/event-log.js";
import { NatsBus } from "../bus/nats-bus.js";
import { processEnvironment } from "../config/process-environment.js";
import type { ProtocolSettings, RuntimeConfig } from "../config/runtime-config.js";
import { secretRedactorFor } from "../config/runtime-config.js";
import type { AgentEvent } from "../events/types.js";
import type { ProviderEnvironment } from "../llm/create-backend.js";
import { McpServerPool } from "../mcp/mcp-server-pool.js";
import { AgentProtocolHost } from "../protocol/agent-protocol-host.js";
import type { ResolvedAgentDefinition } from "./agent-definitions.js";
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
}

/** A running agent host with what it holds open. */
export interface HostService {
  host: AgentHost;
  /** The Agent Protocol side (undefined on the in-process bus: there is no `$SRV` there). */
  protocol: AgentProtocolHost | undefined;
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
  const mcpServers = new McpServerPool(options.definitions, { env, log });
  const factory = createSessionAgentFactory({
    definitions: options.definitions,
    bus,
    prefix: config.prefix,
    redactor,
    // The shell reads the variables it passes on from the same environment as the providers.
    shell: { env },
    ...(config.db === undefined ? {} : { db: config.db }),
    ...(options.env === undefined ? {} : { env: options.env }),
    ...(options.onEvent === undefined ? {} : { onEvent: options.onEvent }),
    log,
    mcpServers,
  });
  // Servers that cannot start are logged and retried: the host serves without their tools meanwhile.
  await mcpServers.start();
  if (bus instanceof NatsBus) {
    try {
      await ensureEventStream(bus.connection, { prefix: config.prefix });
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      log(`no event log (JetStream): ${reason}; events are still published, tail --since cannot replay them`);
    }
  }
  // On NATS our own contract is a `$SRV` micro service (`agentloop`); in process, plain subscriptions.
  let contract: ContractService | undefined;
  let host: AgentHost;
  let protocol: AgentProtocolHost | undefined;
  try {
    contract =
      bus instanceof NatsBus
        ? await ContractService.start(bus, {
            prefix: config.prefix,
            log,
            statsData: () => ({ eventPublishFailures: factory.eventPublishFailures }),
          })
        : undefined;
    host = new AgentHost({
      bus,
      prefix: config.prefix,
      agents: options.definitions.map((definition) => definition.name),
      createAgent: factory.createAgent,
      log,
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
  return {
    host,
    protocol,
    close: async (closeOptions = {}) => {
      // No new prompts; running ones end with the host's sessions (answered, or cancelled after the grace).
      await protocol?.stop();
      await host.close(closeOptions);
      await protocol?.drained();
      await contract?.stop();
      await mcpServers.close();
      factory.close();
    },
  };
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
