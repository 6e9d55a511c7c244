import { redactNatsUrl } from "../../bus/nats-url.js";
import { SessionLeaseStore, type StoredLease } from "../../cluster/session-lease.js";
import { describeError } from "../../errors/describe-error.js";
import type { Command } from "../cli-context.js";
import { connectCommandToNats } from "../command-helpers.js";

/** One session as `agentloop sessions` shows it. */
export interface SessionListing {
  agent: string;
  session: string;
  host: string;
  /** `idle` / `busy` as of the owner's last renewal; `unknown` when it did not say. */
  state: string;
  epoch: number;
  /** How long the current owner has held it (ms). */
  heldMs: number;
  /** Time left before the lease expires (ms; negative once expired). */
  expiresInMs: number;
}

/**
 * `agentloop sessions [--json]`: the live sessions of every host on the NATS system,
 * read from the lease bucket — owner host, state, epoch, how long held, when the lease expires.
 * Released and expired leases are not live and are left out.
 */
export const sessionsCommand: Command = async (context) => {
  const { config } = context;
  const url = redactNatsUrl(config.natsUrl);
  const bus = await connectCommandToNats(context, "sessions");
  if (typeof bus === "number") return bus;
  try {
    let leases: StoredLease[];
    try {
      const store = await SessionLeaseStore.openExisting(bus.connection, { prefix: config.prefix });
      leases = store === undefined ? [] : await store.list();
    } catch (error) {
      const reason = describeError(error);
      context.stderr.write(`agentloop sessions: cannot read the session leases (JetStream KV): ${reason}\n`);
      return 1;
    }
    const listings = liveSessions(leases, Date.now());
    if (context.flags.json === true) {
      for (const listing of listings) context.stdout.write(`${JSON.stringify(listing)}\n`);
    } else if (listings.length === 0) {
      context.stdout.write(`no live sessions on ${url}\n`);
    } else {
      for (const listing of listings) context.stdout.write(`${formatSession(listing)}\n`);
    }
    return 0;
  } finally {
    await bus.close();
  }
};

/** The leases that are live at `now` (not released, not expired), as listings. */
export function liveSessions(leases: readonly StoredLease[], now: number): SessionListing[] {
  return leases
    .filter(({ record }) => record.released !== true && record.expiresAt > now)
    .map(({ agent, session, record }) => ({
      agent,
      session,
      host: record.host,
      state: record.state ?? "unknown",
      epoch: record.epoch,
      heldMs: Math.max(0, now - record.acquiredAt),
      expiresInMs: record.expiresAt - now,
    }));
}

/** `agent/session  host H  busy  epoch 3  held 12s  expires in 8s`. */
export function formatSession(listing: SessionListing): string {
  return [
    `${listing.agent}/${listing.session}`,
    `host ${listing.host}`,
    listing.state,
    `epoch ${listing.epoch}`,
    `held ${seconds(listing.heldMs)}`,
    `expires in ${seconds(listing.expiresInMs)}`,
  ].join("  ");
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10}s`;
}
