import type { NatsConnection } from "@nats-io/transport-node";
import { type DiscoveredAgent, discoverAgents } from "./discovery.js";
import { type HeartbeatSighting, isOnline, watchHeartbeats } from "./heartbeat-watch.js";

/** One agent instance on the system, with its online state. */
export interface AgentListing {
  agent: string | undefined;
  owner: string | undefined;
  /** Session metadata, else the instance token of its subjects. */
  name: string | undefined;
  /** The micro service id (`instance_id` of its heartbeats). */
  instanceId: string;
  /**
   * `online` while its last heartbeat is younger than 3 × `interval_s`; `offline` when it sent
   * none within the watch (its heartbeats stopped, or come slower than the window).
   */
  state: "online" | "offline";
  protocolVersion: string | undefined;
  endpoints: { name: string; subject: string }[];
  /** Seconds since its last heartbeat, when one came. */
  lastHeartbeatS: number | undefined;
  intervalS: number | undefined;
  /** False for an instance known only from its heartbeats (it did not answer discovery). */
  isDiscovered: boolean;
}

export interface ListAgentsOptions {
  /** The longest the listing watches heartbeats (and waits for discovery). */
  windowMs: number;
  signal?: AbortSignal;
  now?: () => number;
}

/**
 * Every protocol agent on the system (ours and others'): discovery (`$SRV.INFO.agents`) and a
 * heartbeat watch (`agents.hb.*.*.*`) run together. The watch ends early once every discovered
 * instance has sent a heartbeat, else after `windowMs`.
 */
export async function listAgents(
  connection: NatsConnection,
  options: ListAgentsOptions,
): Promise<AgentListing[]> {
  const now = options.now ?? Date.now;
  let onSighting: (() => void) | undefined;
  const watch = watchHeartbeats(connection, { now, onSighting: () => onSighting?.() });
  try {
    const startedAt = now();
    const discovered = await discoverAgents(connection, {
      windowMs: options.windowMs,
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });
    const isComplete = (): boolean => {
      const seen = new Set(watch.sightings().map((sighting) => sighting.heartbeat.instance_id));
      return discovered.every((agent) => seen.has(agent.id));
    };
    const remainingMs = options.windowMs - (now() - startedAt);
    if (!isComplete() && remainingMs > 0 && options.signal?.aborted !== true) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer);
          options.signal?.removeEventListener("abort", done);
          onSighting = undefined;
          resolve();
        };
        const timer = setTimeout(done, remainingMs);
        options.signal?.addEventListener("abort", done, { once: true });
        onSighting = () => {
          if (isComplete()) done();
        };
      });
    }
    return toAgentListings(discovered, watch.sightings(), now());
  } finally {
    watch.stop();
  }
}

/** Joins discovery replies and heartbeats by instance id, sorted by agent / owner / name. */
export function toAgentListings(
  discovered: readonly DiscoveredAgent[],
  sightings: readonly HeartbeatSighting[],
  now: number,
): AgentListing[] {
  const byInstance = new Map(sightings.map((sighting) => [sighting.heartbeat.instance_id, sighting]));
  const listings: AgentListing[] = discovered.map((agent) => {
    const sighting = byInstance.get(agent.id);
    byInstance.delete(agent.id);
    return {
      agent: agent.agent,
      owner: agent.owner,
      name: agent.name,
      instanceId: agent.id,
      protocolVersion: agent.protocolVersion,
      endpoints: agent.endpoints,
      isDiscovered: true,
      ...heartbeatState(sighting, now),
    };
  });
  for (const sighting of byInstance.values()) {
    listings.push({
      agent: sighting.heartbeat.agent ?? sighting.address.agent,
      owner: sighting.heartbeat.owner ?? sighting.address.owner,
      name: sighting.heartbeat.session ?? sighting.address.name,
      instanceId: sighting.heartbeat.instance_id,
      protocolVersion: undefined,
      endpoints: [],
      isDiscovered: false,
      ...heartbeatState(sighting, now),
    });
  }
  const key = (listing: AgentListing): string =>
    `${listing.agent ?? ""}\u0000${listing.owner ?? ""}\u0000${listing.name ?? ""}\u0000${listing.instanceId}`;
  return listings.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
}

function heartbeatState(
  sighting: HeartbeatSighting | undefined,
  now: number,
): Pick<AgentListing, "state" | "lastHeartbeatS" | "intervalS"> {
  if (sighting === undefined) return { state: "offline", lastHeartbeatS: undefined, intervalS: undefined };
  return {
    state: isOnline(sighting, now) ? "online" : "offline",
    lastHeartbeatS: Math.max(0, Math.round((now - sighting.receivedAt) / 100) / 10),
    intervalS: sighting.heartbeat.interval_s,
  };
}
