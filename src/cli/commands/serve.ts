import { BusConfigError } from "../../bus/bus-errors.js";
import { NatsBus } from "../../bus/nats-bus.js";
import { redactNatsUrl } from "../../bus/nats-url.js";
import { SHUTDOWN_WAIT_MS, settlesWithin } from "../../cluster/bounded-wait.js";
import { loadAgentDefinitions, type ResolvedAgentDefinition } from "../../config/agent-definitions.js";
import { loadConfigFile } from "../../config/load-config-file.js";
import {
  DEFAULT_MODELS,
  historyBackendFrom,
  hostIdFrom,
  idleTimeoutFrom,
  maxChatsFrom,
  maxChatTimeFrom,
  maxLoopDelayFrom,
  maxSessionsFrom,
  memoryLimitsFrom,
  natsHoldBytesFrom,
  parentLeaseFrom,
  protocolSettingsFrom,
  quietGcFrom,
} from "../../config/runtime-config.js";
import { readTenantLimits } from "../../config/tenant-limits.js";
import { profilesFromDefinitions } from "../../doors/a2a/a2a-agents.js";
import { createHttpDoors } from "../../doors/http-doors.js";
import { describeError } from "../../errors/describe-error.js";
import { EXIT_USER_MISTAKE } from "../../errors/error-code.js";
import { createHostToolSetRegistry } from "../../host/create-session-agent.js";
import { describeAgents, startHostService } from "../../host/host-service.js";
import type { ProviderName } from "../../llm/create-backend.js";
import { startUiServer, type UiServer } from "../../ui/ui-server.js";
import { type CliContext, type Command, UsageError } from "../cli-context.js";
import { clusterSettingsFrom } from "../cluster-settings.js";
import { natsIdentityOptions, parsePort, untilAborted } from "../command-helpers.js";
import { uiSettingsFrom } from "../ui-settings.js";
import { announceOtherAddresses } from "./ui.js";

/** `--agents FILE` (JSON) or `--config FILE` (code) read, validated and completed from the CLI configuration. */
export function loadAgentsFromFlags(context: CliContext): Promise<ResolvedAgentDefinition[]> {
  const { agents, config } = context.flags;
  if (agents === true || agents === "") throw new UsageError("--agents needs a FILE");
  if (config === true || config === "") throw new UsageError("--config needs a FILE");
  const options = {
    knownTools: createHostToolSetRegistry().names(),
    defaultModel: (provider: ProviderName) => DEFAULT_MODELS[provider],
  };
  if (typeof config === "string") {
    if (typeof agents === "string") throw new UsageError("--config and --agents cannot be used together");
    return loadConfigFile(config, context.config, options);
  }
  return loadAgentDefinitions(typeof agents === "string" ? agents : undefined, context.config, options);
}

/**
 * `agentloop serve [--agents FILE | --config FILE]`: the agent host alone, on NATS. Prints one line
 * naming the bus and the agents; on SIGINT / SIGTERM stops taking requests, lets running chats
 * finish (up to the grace period) and exits 0. A second signal cancels what still runs: every
 * waiting caller is answered `cancelled`, the cancelled chats write their history, the replies
 * are flushed, and it exits 130.
 */
export const serveCommand: Command = async (context) => {
  const { config } = context;
  const definitions = await loadAgentsFromFlags(context);
  // Checked with the agents just above: what is left is reading the section.
  const tenants =
    typeof context.flags.agents === "string" ? await readTenantLimits(context.flags.agents) : {};
  // Every flag is checked before connecting: a typo is a usage error, not a NATS problem.
  const idleTimeoutMs = idleTimeoutFrom(context.flags, context.env);
  const quietCollectionMs = quietGcFrom(context.flags, context.env);
  const maxChatTimeMs = maxChatTimeFrom(context.flags, context.env);
  const maxLoopDelayMs = maxLoopDelayFrom(context.flags, context.env);
  const maxChats = maxChatsFrom(context.flags, context.env);
  const parentLeaseMs = parentLeaseFrom(context.flags, context.env);
  const maxSessions = maxSessionsFrom(context.flags, context.env);
  const memoryLimits = memoryLimitsFrom(context.flags, context.env);
  const maxHeldBytes = natsHoldBytesFrom(context.flags, context.env);
  const protocol = protocolSettingsFrom(context.flags, context.env);
  const hostId = hostIdFrom(context.flags, context.env);
  const history = historyBackendFrom(context.flags, context.env);
  const cluster = clusterSettingsFrom(context.flags, context.env);
  const httpPort = context.flags.http === undefined ? undefined : parsePort(context.flags.http, 0, "--http");
  const host = typeof context.flags.host === "string" ? context.flags.host : undefined;
  const uiSettings = uiSettingsFrom(context.flags, context.env);
  if (httpPort === undefined && (host !== undefined || Object.keys(uiSettings).length > 0)) {
    throw new UsageError("--host and the --ui-* flags of serve need --http PORT");
  }
  const url = redactNatsUrl(config.natsUrl);
  const log = (line: string) => context.stderr.write(`agentloop serve: ${line}\n`);
  let bus: NatsBus;
  try {
    bus = await NatsBus.connect({
      url: config.natsUrl,
      name: "agentloop serve",
      log,
      ...(maxHeldBytes === undefined ? {} : { maxHeldBytes }),
      ...natsIdentityOptions(config),
    });
  } catch (error) {
    const reason = describeError(error);
    if (error instanceof BusConfigError) {
      log(reason);
      return EXIT_USER_MISTAKE;
    }
    context.stderr.write(
      `agentloop serve: cannot reach NATS at ${url}: ${reason} (start nats-server -js, or run \`agentloop up\` for an in-process bus)\n`,
    );
    return 1;
  }
  // Lease upkeep on a connection of its own: renewals never queue behind the bulk traffic.
  let leaseBus: NatsBus;
  try {
    leaseBus = await NatsBus.connect({
      url: config.natsUrl,
      name: "agentloop serve (leases)",
      log: (line) => log(`lease connection: ${line}`),
      ...natsIdentityOptions(config),
    });
  } catch (error) {
    await settlesWithin(bus.close(), SHUTDOWN_WAIT_MS);
    log(`cannot open the lease connection to NATS at ${url}: ${describeError(error)}`);
    return error instanceof BusConfigError ? EXIT_USER_MISTAKE : 1;
  }
  try {
    const service = await startHostService({
      bus,
      leaseConnection: leaseBus.connection,
      // This host's own lease is renewed on a thread of its own: a flood of chats that stalls the
      // main event loop for seconds cannot make it lapse and drop every shard the host holds.
      leaseThread: {
        connect: {
          url: config.natsUrl,
          name: "agentloop serve (host lease)",
          ...natsIdentityOptions(config),
        },
      },
      definitions,
      config,
      env: context.env,
      log,
      ...(idleTimeoutMs === undefined ? {} : { idleTimeoutMs }),
      ...(quietCollectionMs === undefined ? {} : { quietCollectionMs }),
      ...(maxChatTimeMs === undefined ? {} : { maxChatTimeMs }),
      ...(maxLoopDelayMs === undefined ? {} : { maxLoopDelayMs }),
      ...(maxChats === undefined ? {} : { maxChats }),
      ...(parentLeaseMs === undefined ? {} : { parentLeaseMs }),
      ...(maxSessions === undefined ? {} : { maxSessions }),
      ...memoryLimits,
      ...(hostId === undefined ? {} : { hostId }),
      history,
      protocol,
      tenants,
      ...cluster,
    });
    context.stdout.write(
      `agentloop serve: bus ${url} (nats, prefix ${config.prefix}, host ${service.hostId}${history === "nats" ? ", history nats" : ""}); agents: ${describeAgents(definitions)}\n`,
    );
    let http: UiServer | undefined;
    if (httpPort !== undefined) {
      http = await startUiServer({
        bus,
        prefix: config.prefix,
        port: httpPort,
        ...(host === undefined ? {} : { host }),
        natsConnection: bus.connection,
        ...uiSettings,
        doors: createHttpDoors({ a2aAgents: profilesFromDefinitions(definitions, bus) }),
        log: (line) => log(`HTTP ${line}`),
      });
      context.stdout.write(`agentloop serve: HTTP ${http.url}\n`);
      announceOtherAddresses(http, "agentloop serve: HTTP", context.stdout, context.stderr);
    }
    await untilAborted(context.signal);
    await http?.close();
    context.stderr.write(
      "agentloop serve: stopping: finishing running chats (signal again to cancel them)\n",
    );
    const hurry = context.urgentSignal;
    const onHurry = () => context.stderr.write("agentloop serve: cancelling running chats\n");
    hurry?.addEventListener("abort", onHurry, { once: true });
    await service.close(hurry === undefined ? {} : { hurry });
    hurry?.removeEventListener("abort", onHurry);
    return hurry?.aborted === true ? 130 : 0;
  } finally {
    // Bounded: with the server gone a drain waits for a reconnect that may never come.
    await Promise.all([
      settlesWithin(bus.close(), SHUTDOWN_WAIT_MS),
      settlesWithin(leaseBus.close(), SHUTDOWN_WAIT_MS),
    ]);
  }
};
