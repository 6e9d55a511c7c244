import { BusConfigError } from "../bus/bus-errors.js";
import { NatsBus } from "../bus/nats-bus.js";
import { redactNatsUrl } from "../bus/nats-url.js";
import { describeError } from "../errors/describe-error.js";
import { EXIT_USER_MISTAKE } from "../errors/error-code.js";
import { type CliContext, type RuntimeConfig, UsageError } from "./cli-context.js";

/**
 * Who this process is on NATS, as the shared flags say: the credentials file (`--nats-creds`) and
 * the reply inbox prefix (`--inbox-prefix`). Every command that connects passes these on.
 */
export function natsIdentityOptions(config: RuntimeConfig): { credsFile?: string; inboxPrefix?: string } {
  return {
    ...(config.natsCreds === undefined ? {} : { credsFile: config.natsCreds }),
    ...(config.natsInboxPrefix === undefined ? {} : { inboxPrefix: config.natsInboxPrefix }),
  };
}

/** Resolves when a long-running command is told to stop (SIGINT / SIGTERM). */
export function untilAborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener("abort", () => resolve(), { once: true }));
}

/** `--port N`: 0 (the default) picks a free port. */
export function parsePort(value: string | boolean | undefined, flag = "--port"): number {
  if (value === undefined) return 0;
  const port = typeof value === "string" && /^\d+$/.test(value) ? Number(value) : Number.NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new UsageError(`${flag} must be a number from 0 to 65535, got "${String(value)}"`);
  }
  return port;
}

/**
 * Connects a short-lived command (`agents`, `sessions`, `tail`) to the configured NATS server; when
 * it cannot, says so in one line on stderr (`agentloop <command>: cannot reach NATS at …`) and
 * resolves the exit code instead: 2 for a configuration mistake (a bad URL, an unreadable
 * credentials file, refused credentials), 1 when no server answers.
 */
export async function connectCommandToNats(context: CliContext, command: string): Promise<NatsBus | number> {
  const { config } = context;
  try {
    return await NatsBus.connect({
      url: config.natsUrl,
      name: `agentloop ${command}`,
      ...natsIdentityOptions(config),
    });
  } catch (error) {
    const reason = describeError(error);
    if (error instanceof BusConfigError) {
      context.stderr.write(`agentloop ${command}: ${reason}\n`);
      return EXIT_USER_MISTAKE;
    }
    context.stderr.write(
      `agentloop ${command}: cannot reach NATS at ${redactNatsUrl(config.natsUrl)}: ${reason}\n`,
    );
    return 1;
  }
}
