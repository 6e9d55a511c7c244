import type { Bus } from "../../bus/bus.js";
import { LocalBus } from "../../bus/local-bus.js";
import { NatsBus } from "../../bus/nats-bus.js";
import { redactNatsUrl } from "../../bus/nats-url.js";
import { startUiServer } from "../../ui/ui-server.js";
import type { Command } from "../cli-context.js";
import { natsIdentityOptions, parsePort, untilAborted } from "../command-helpers.js";

/** How long `ui` waits for a NATS server before falling back to the in-process bus. */
const NATS_PROBE_TIMEOUT_MS = 2_000;

/** `agentloop ui [--port N]`: the UI service on its own, watching the bus. */
export const uiCommand: Command = async (context) => {
  const port = parsePort(context.flags.port);
  const host = typeof context.flags.host === "string" ? context.flags.host : undefined;
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
    });
    context.stdout.write(`agentloop ui: ${server.url} (bus: ${bus.kind})\n`);
    await untilAborted(context.signal);
    await server.close();
  } finally {
    await bus.close();
  }
  return 0;
};
