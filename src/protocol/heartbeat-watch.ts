import type { NatsConnection } from "@nats-io/transport-node";
import { type AgentAddress, HEARTBEATS_PATTERN, parseProtocolSubject } from "./protocol-subjects.js";
import { Heartbeat, parseJson } from "./wire.js";

/** The last heartbeat of one agent instance, as a watcher saw it. */
export interface HeartbeatSighting {
  /** Agent, owner and name from the heartbeat's subject. */
  address: AgentAddress;
  heartbeat: Heartbeat;
  /**
   * When it arrived, by the watcher's clock (epoch ms). Freshness is judged by this, not by the
   * sender's `ts`, so clocks that disagree between machines do not matter.
   */
  receivedAt: number;
}

export interface HeartbeatWatch {
  /** The latest sighting per instance (`instance_id`). */
  sightings(): HeartbeatSighting[];
  stop(): void;
}

/**
 * Subscribes to every heartbeat (`agents.hb.*.*.*`, or one agent's `subject`) and keeps the latest per instance; `onSighting`
 * hears each valid one. Messages that are not heartbeats, or arrive on a subject that is not
 * `agents.hb.<agent>.<owner>.<name>`, are skipped.
 */
export function watchHeartbeats(
  connection: NatsConnection,
  options: {
    onSighting?: (sighting: HeartbeatSighting) => void;
    /** One agent's heartbeat subject instead of every heartbeat. */
    subject?: string;
    now?: () => number;
  } = {},
): HeartbeatWatch {
  const now = options.now ?? Date.now;
  const latest = new Map<string, HeartbeatSighting>();
  const subscription = connection.subscribe(options.subject ?? HEARTBEATS_PATTERN, {
    callback: (error, message) => {
      if (error !== null) return;
      const address = parseProtocolSubject(message.subject);
      const heartbeat = parseJson(Heartbeat, message.string());
      if (address === undefined || address.verb !== "hb" || heartbeat === undefined) return;
      const { verb: _verb, ...tokens } = address;
      const sighting = { address: tokens, heartbeat, receivedAt: now() };
      latest.set(heartbeat.instance_id, sighting);
      options.onSighting?.(sighting);
    },
  });
  return {
    sightings: () => [...latest.values()],
    stop: () => {
      try {
        subscription.unsubscribe();
      } catch {
        // Already gone with the connection.
      }
    },
  };
}

/** An agent counts online while its last heartbeat is younger than 3 × `interval_s` (§8). */
export function isOnline(sighting: HeartbeatSighting, now: number): boolean {
  return now - sighting.receivedAt < 3 * sighting.heartbeat.interval_s * 1000;
}
