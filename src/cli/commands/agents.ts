import { redactNatsUrl } from "../../bus/nats-url.js";
import { parseDuration } from "../../config/runtime-config.js";
import { type AgentListing, listAgents } from "../../protocol/agent-directory.js";
import { type CliContext, type Command, UsageError } from "../cli-context.js";
import { connectCommandToNats } from "../command-helpers.js";

/** How long `agentloop agents` watches by default: longer than a few heartbeat intervals' worth of 1 s. */
export const DEFAULT_AGENTS_WINDOW_MS = 5_000;
/** The longest `--timeout` accepted: a listing, not a monitor. */
const MAX_AGENTS_WINDOW_MS = 60_000;

/**
 * `agentloop agents [--timeout 5s] [--json]`: every agent on the NATS system that speaks the agent
 * protocol (agentloop's and other frameworks'), one line per instance with its online state from
 * heartbeats. Discovery and the heartbeat watch run for at most `--timeout`, less once every
 * discovered instance has sent a heartbeat.
 */
export const agentsCommand: Command = async (context) => {
  const { config, flags } = context;
  const windowMs = parseWindow(flags.timeout);
  const url = redactNatsUrl(config.natsUrl);
  const bus = await connectCommandToNats(context, "agents");
  if (typeof bus === "number") return bus;
  try {
    let listings: AgentListing[];
    try {
      listings = await listAgents(bus.connection, { windowMs, signal: context.signal });
    } catch (error) {
      // Interrupted (SIGINT / SIGTERM) while listening: nothing to print.
      if (context.signal.aborted) return 130;
      throw error;
    }
    if (flags.json === true) {
      for (const listing of listings) context.stdout.write(`${JSON.stringify(toJsonLine(listing))}\n`);
    } else if (listings.length === 0) {
      context.stdout.write(`no protocol agents answered on ${url}\n`);
    } else {
      for (const listing of listings) context.stdout.write(`${formatListing(listing)}\n`);
    }
    return 0;
  } finally {
    await bus.close();
  }
};

function parseWindow(value: CliContext["flags"][string]): number {
  if (value === undefined) return DEFAULT_AGENTS_WINDOW_MS;
  if (typeof value !== "string") throw new UsageError("--timeout needs a duration, e.g. 2s");
  const milliseconds = parseDuration(value, "--timeout") ?? DEFAULT_AGENTS_WINDOW_MS;
  if (milliseconds > MAX_AGENTS_WINDOW_MS)
    throw new UsageError(`--timeout must be at most 60s, got "${value}"`);
  return Math.ceil(milliseconds);
}

/**
 * `agent/owner/name  online  protocol 0.3  prompt=<subject> status=<subject>  id=<instance>`;
 * `?` for what an instance did not say.
 */
export function formatListing(listing: AgentListing): string {
  const who = `${listing.agent ?? "?"}/${listing.owner ?? "?"}/${listing.name ?? "?"}`;
  const heartbeat =
    listing.lastHeartbeatS === undefined ? "no heartbeat" : `heartbeat ${listing.lastHeartbeatS}s ago`;
  const endpoints =
    listing.endpoints.length === 0
      ? "(did not answer discovery)"
      : listing.endpoints.map((endpoint) => `${endpoint.name}=${endpoint.subject}`).join(" ");
  return [
    who,
    listing.state,
    `protocol ${listing.protocolVersion ?? "?"}`,
    endpoints,
    heartbeat,
    `id=${listing.instanceId}`,
  ].join("  ");
}

function toJsonLine(listing: AgentListing): Record<string, unknown> {
  return {
    agent: listing.agent ?? null,
    owner: listing.owner ?? null,
    name: listing.name ?? null,
    instance_id: listing.instanceId,
    state: listing.state,
    protocol_version: listing.protocolVersion ?? null,
    endpoints: listing.endpoints,
    last_heartbeat_s: listing.lastHeartbeatS ?? null,
    interval_s: listing.intervalS ?? null,
    discovered: listing.isDiscovered,
  };
}
