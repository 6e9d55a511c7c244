import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import type { NatsBus } from "../../bus/nats-bus.js";
import { redactNatsUrl } from "../../bus/nats-url.js";
import { listKvKeys } from "../../cluster/kv-keys.js";
import { MemberRecord, membersBucketName } from "../../cluster/membership.js";
import { SessionLeaseStore, type StoredLease } from "../../cluster/session-lease.js";
import { entryJson } from "../../cluster/watched-bucket.js";
import { describeError } from "../../errors/describe-error.js";
import type { HostSessionListing } from "../../host/agent-host.js";
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
 * `agentloop sessions [--json]`: the live sessions of every host on the NATS system — each live
 * member (the members bucket) is asked on `<prefix>.hosts.<host>.sessions`, and hosts of older
 * versions are read from the session lease bucket — owner host, state, epoch (of the session's
 * shard lease), how long held, when the lease expires.
 * Released and expired leases are not live and are left out.
 */
export const sessionsCommand: Command = async (context) => {
  const { config } = context;
  const url = redactNatsUrl(config.natsUrl);
  const bus = await connectCommandToNats(context, "sessions");
  if (typeof bus === "number") return bus;
  try {
    let leases: StoredLease[];
    let members: MemberRecord[];
    try {
      // Hosts that own sessions by shard answer for their live sessions; older hosts leased each one.
      members = await liveMembers(bus.connection, config.prefix);
      const store = await SessionLeaseStore.openExisting(bus.connection, { prefix: config.prefix });
      leases = store === undefined ? [] : await store.list();
    } catch (error) {
      const reason = describeError(error);
      context.stderr.write(`agentloop sessions: cannot read the session leases (JetStream KV): ${reason}\n`);
      return 1;
    }
    const now = Date.now();
    const answers = await Promise.all(
      members.map((member) => askHost(bus, `${member.subject}.sessions`).catch(() => undefined)),
    );
    const listings = [
      ...answers.flatMap((answer) => (answer === undefined ? [] : shardedSessions(answer, now))),
      ...liveSessions(leases, now),
    ].sort((a, b) => `${a.agent}/${a.session}`.localeCompare(`${b.agent}/${b.session}`));
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

/** A host's answer on `<prefix>.hosts.<host>.sessions`, as listings. */
export function shardedSessions(answer: HostSessionListing, now: number): SessionListing[] {
  return answer.sessions.map((entry) => ({
    agent: entry.agent,
    session: entry.session,
    host: answer.host,
    state: entry.state,
    epoch: entry.epoch,
    heldMs: Math.max(0, now - entry.acquiredAt),
    expiresInMs: entry.expiresAt - now,
  }));
}

/** The members bucket's live hosts (none when the bucket does not exist). */
async function liveMembers(connection: NatsConnection, prefix: string): Promise<MemberRecord[]> {
  const name = membersBucketName(prefix);
  const kvm = new Kvm(connection);
  let exists = false;
  for await (const status of kvm.list()) if (status.bucket === name) exists = true;
  if (!exists) return [];
  const kv = await kvm.open(name);
  const now = Date.now();
  const records = await Promise.all(
    (await listKvKeys(connection, name)).map(async (key) => {
      const entry = await kv.get(key);
      if (entry === null || entry.operation !== "PUT") return undefined;
      const parsed = MemberRecord.safeParse(entryJson(entry));
      return parsed.success && now <= parsed.data.expiresAt ? parsed.data : undefined;
    }),
  );
  return records.filter((record): record is MemberRecord => record !== undefined);
}

async function askHost(bus: NatsBus, subject: string): Promise<HostSessionListing> {
  const reply = await bus.request(subject, "", { timeoutMs: 3_000 });
  return JSON.parse(reply.data) as HostSessionListing;
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
