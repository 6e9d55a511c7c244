import { createServer } from "node:net";
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

/** The web UI's port when `--port` is not given (`--port 0` picks a free one). */
export const DEFAULT_UI_PORT = 4280;

/** `--port N` (or the flag named): 0 picks a free port; absent: `defaultPort`. */
export function parsePort(value: string | boolean | undefined, defaultPort = 0, flag = "--port"): number {
  if (value === undefined) return defaultPort;
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

/**
 * Fails with one line (a {@link UsageError}: exit 2) when `port` cannot be listened on at `host`:
 * in use, or not allowed. Checked before anything else starts, so a busy port is the only thing
 * said; the real listen reports the same way through {@link describeListenFailure}.
 */
export async function assertPortFree(host: string, port: number, isDefault: boolean): Promise<void> {
  if (port === 0) return;
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once("error", reject);
      probe.listen({ port, host, exclusive: true }, () => resolve());
    });
  } catch (error) {
    throw describeListenFailure(error, host, port, isDefault) ?? error;
  } finally {
    await new Promise<void>((resolve) => probe.close(() => resolve()));
  }
}

/** A listen error as one line for the user (a busy or forbidden port), or undefined for others. */
export function describeListenFailure(
  error: unknown,
  host: string,
  port: number,
  isDefault: boolean,
): UsageError | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  const which = isDefault ? `the UI's default port ${port}` : `port ${port}`;
  if (code === "EADDRINUSE") {
    return new UsageError(
      `${which} on ${host} is in use (another agentloop?): pick another with --port N, or --port 0 for any free port`,
    );
  }
  if (code === "EACCES") {
    return new UsageError(
      `${which} on ${host} is not allowed for this user: pick one above 1023, or --port 0`,
    );
  }
  if (code === "EADDRNOTAVAIL") {
    return new UsageError(`--host ${host} is not an address of this machine`);
  }
  return undefined;
}
