import type { Bus } from "../../bus/bus.js";
import { LocalBus } from "../../bus/local-bus.js";
import { NatsBus } from "../../bus/nats-bus.js";
import { redactNatsUrl } from "../../bus/nats-url.js";
import { allEventsPattern } from "../../bus/subjects.js";
import {
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
import { profilesFromDefinitions } from "../../doors/a2a/a2a-agents.js";
import { createHttpDoors } from "../../doors/http-doors.js";
import { describeAgents, startHostService } from "../../host/host-service.js";
import { startUiServer } from "../../ui/ui-server.js";
import type { Command } from "../cli-context.js";
import { clusterSettingsFrom } from "../cluster-settings.js";
import {
  assertPortFree,
  DEFAULT_UI_PORT,
  describeListenFailure,
  natsIdentityOptions,
  parsePort,
  untilAborted,
} from "../command-helpers.js";
import { uiSettingsFrom } from "../ui-settings.js";
import { loadAgentsFromFlags } from "./serve.js";
import { createEventLogger, followEvents, NOISY_EVENT_KINDS } from "./tail.js";
import { announceOtherAddresses } from "./ui.js";

/** How long `up` waits for a NATS server before falling back to the in-process bus. */
const NATS_PROBE_TIMEOUT_MS = 2_000;

/**
 * `agentloop up [--port N] [--agents FILE | --config FILE]`: the host, the logger and the UI in one process
 * (`npm start`). The bus is NATS when a server answers at the configured URL, else the in-process bus
 * (said on stderr). The logger prints one line per event, leaving out per-token deltas and state
 * changes (`agentloop tail` shows everything). Prints the UI's URL; SIGINT / SIGTERM stops it all
 * (running chats may finish; a second signal cancels them, answering their callers `cancelled`).
 */
export const upCommand: Command = async (context) => {
  const { config } = context;
  const port = parsePort(context.flags.port, DEFAULT_UI_PORT);
  const listenHost = typeof context.flags.host === "string" ? context.flags.host : "127.0.0.1";
  const isDefaultPort = context.flags.port === undefined;
  const definitions = await loadAgentsFromFlags(context);
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
  const uiSettings = uiSettingsFrom(context.flags, context.env);
  // Checked before anything starts: a busy port is then the one thing said.
  await assertPortFree(listenHost, port, isDefaultPort);
  const url = redactNatsUrl(config.natsUrl);
  const log = (line: string) => context.stderr.write(`agentloop up: ${line}\n`);
  const nats = await NatsBus.tryConnect(config.natsUrl, NATS_PROBE_TIMEOUT_MS, {
    name: "agentloop up",
    log,
    ...(maxHeldBytes === undefined ? {} : { maxHeldBytes }),
    ...natsIdentityOptions(config),
  });
  let bus: Bus;
  if (nats !== undefined) bus = nats;
  else if (history === "nats") {
    context.stderr.write(
      `agentloop up: --history nats needs a NATS server with JetStream, and none answers at ${url}\n`,
    );
    return 1;
  } else {
    bus = new LocalBus();
    context.stderr.write(
      `agentloop up: no NATS server at ${url}; using the in-process bus (same subjects, this process only; no $SRV services, so no Agent Protocol)\n`,
    );
  }
  const logger = createEventLogger({ stdout: context.stdout, skipKinds: NOISY_EVENT_KINDS });
  const stopLogger = new AbortController();
  try {
    const service = await startHostService({
      bus,
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
      ...cluster,
    });
    const following = followEvents({
      bus,
      prefix: config.prefix,
      filter: allEventsPattern(config.prefix),
      logger,
      signal: stopLogger.signal,
    });
    try {
      const ui = await startUiServer({
        bus,
        prefix: config.prefix,
        port,
        ...(typeof context.flags.host === "string" ? { host: context.flags.host } : {}),
        ...(nats === undefined ? {} : { natsConnection: nats.connection }),
        ...uiSettings,
        doors: createHttpDoors({ a2aAgents: profilesFromDefinitions(definitions, bus) }),
        log: (line) => log(`UI ${line}`),
      }).catch((error: unknown) => {
        throw describeListenFailure(error, listenHost, port, isDefaultPort) ?? error;
      });
      const where = nats === undefined ? "in-process" : `${url} (nats)`;
      context.stdout.write(`agentloop up: UI ${ui.url}\n`);
      announceOtherAddresses(ui, "agentloop up: UI", context.stdout, context.stderr);
      context.stdout.write(`agentloop up: bus ${where}; agents: ${describeAgents(definitions)}\n`);
      await untilAborted(context.signal);
      log("stopping: closing the UI, finishing running chats (signal again to cancel them)");
      await ui.close();
    } finally {
      const hurry = context.urgentSignal;
      const onHurry = () => log("cancelling running chats");
      hurry?.addEventListener("abort", onHurry, { once: true });
      await service.close(hurry === undefined ? {} : { hurry });
      hurry?.removeEventListener("abort", onHurry);
      stopLogger.abort();
      await following;
    }
    return context.urgentSignal?.aborted === true ? 130 : 0;
  } finally {
    stopLogger.abort();
    await logger.close();
    await bus.close();
  }
};
