import type { Bus } from "../../bus/bus.js";
import { LocalBus } from "../../bus/local-bus.js";
import { NatsBus } from "../../bus/nats-bus.js";
import { redactNatsUrl } from "../../bus/nats-url.js";
import { createHttpDoors } from "../../doors/http-doors.js";
import { startUiServer, type UiServer } from "../../ui/ui-server.js";
import type { CliContext, Command } from "../cli-context.js";
import {
  assertPortFree,
  DEFAULT_UI_PORT,
  describeListenFailure,
  natsIdentityOptions,
  parsePort,
  untilAborted,
} from "../command-helpers.js";
import { uiSettingsFrom } from "../ui-settings.js";

/** How long `ui` waits for a NATS server before falling back to the in-process bus. */
const NATS_PROBE_TIMEOUT_MS = 2_000;

/**
 * `agentloop ui [--port N] [--host ADDR] [--ui-token T] [--ui-allowed-hosts a,b] [--ui-max-streams N]`:
 * the UI service on its own, watching the bus.
 */
export const uiCommand: Command = async (context) => {
  const port = parsePort(context.flags.port, DEFAULT_UI_PORT);
  const listenHost = typeof context.flags.host === "string" ? context.flags.host : "127.0.0.1";
  const isDefaultPort = context.flags.port === undefined;
  const host = typeof context.flags.host === "string" ? context.flags.host : undefined;
  const settings = uiSettingsFrom(context.flags, context.env);
  await assertPortFree(listenHost, port, isDefaultPort);
  const nats = await NatsBus.tryConnect(context.config.natsUrl, NATS_PROBE_TIMEOUT_MS, {
    name: "agentloop ui",
    ...natsIdentityOptions(context.config),
  });
  let bus: Bus;
  if (nats) {
    bus = nats;
  } else {
    bus = new LocalBus();
    context.stderr.write(
      `agentloop ui: no NATS server at ${redactNatsUrl(context.config.natsUrl)}; using the in-process bus ` +
        "(it only sees this process: run `agentloop up` for host and UI together)\n",
    );
  }
  try {
    const server = await startUiServer({
      bus,
      prefix: context.config.prefix,
      port,
      ...(host === undefined ? {} : { host }),
      ...(nats ? { natsConnection: nats.connection } : {}),
      ...settings,
      doors: createHttpDoors(),
      log: (line) => context.stderr.write(`agentloop ui: ${line}\n`),
    }).catch((error: unknown) => {
      throw describeListenFailure(error, listenHost, port, isDefaultPort) ?? error;
    });
    context.stdout.write(`agentloop ui: ${server.url} (bus: ${bus.kind})\n`);
    announceOtherAddresses(server, "agentloop ui:", context.stdout, context.stderr);
    await untilAborted(context.signal);
    await server.close();
  } finally {
    await bus.close();
  }
  return 0;
};

/**
 * After the UI's first URL: its other addresses on `stdout` (listening on every interface), and on
 * `stderr` one line of warning when it is reachable from other machines.
 */
export function announceOtherAddresses(
  server: UiServer,
  label: string,
  stdout: CliContext["stdout"],
  stderr: CliContext["stderr"],
): void {
  for (const url of server.urls.slice(1)) stdout.write(`${label} also at ${url}\n`);
  if (!server.isExposed) return;
  stderr.write(
    `${label} warning: the UI listens beyond loopback; anyone who can reach it and has the token can read ` +
      "every session, chat, and approve held tool calls (keep the token secret; prefer --host 127.0.0.1)\n",
  );
}
