import { headers as createHeaders } from "@nats-io/transport-node";
import { createConnectionInbox } from "../bus/connection-inbox.js";
import type { NatsBus } from "../bus/nats-bus.js";
import { describeDenial, NatsPermissionError, type PermissionDenial } from "../bus/nats-permission-error.js";
import { PROBE_EXPECTED_STREAM, PROBE_HEADER, PROBE_TOKEN } from "../bus/probe-message.js";
import { jetStreamName } from "../bus/subjects.js";

/** How long the JetStream API probe waits for an answer (an answer of any kind will do). */
const JETSTREAM_PROBE_TIMEOUT_MS = 2_000;

/** What the host will publish on, for {@link hostPublishProbes}. */
export interface HostPublishNeeds {
  prefix: string;
  agents: readonly string[];
  /** The server has JetStream (or the histories live there): its API, the KV buckets. */
  usesJetStream: boolean;
  /** `--history nats`: the history stream and the journal bucket. */
  historyOnNats: boolean;
}

/**
 * One subject of each family the host publishes on, inside the family but never a real one: the
 * session, host or agent token is {@link PROBE_TOKEN}. Events and heartbeats are probed per agent,
 * so permissions narrowed to some agents are checked for each one served.
 */
export function hostPublishProbes(needs: HostPublishNeeds): string[] {
  const { prefix } = needs;
  const subjects: string[] = [];
  for (const agent of needs.agents) {
    subjects.push(`${prefix}.events.${agent}.${PROBE_TOKEN}.PermissionProbe`);
    subjects.push(`${prefix}.sessions.${agent}.${PROBE_TOKEN}.heartbeat`);
  }
  const firstAgent = needs.agents[0] ?? PROBE_TOKEN;
  // Forwarding to a session's owner, and passing on to a host that serves the agent.
  subjects.push(`${prefix}.hosts.${PROBE_TOKEN}.agents.${firstAgent}.chat`);
  subjects.push(`${prefix}.serving.${PROBE_TOKEN}.chat`);
  if (needs.usesJetStream) {
    subjects.push(`$KV.${jetStreamName(prefix, "SHARDS")}.${PROBE_TOKEN}`);
    subjects.push(`$KV.${jetStreamName(prefix, "MEMBERS")}.${PROBE_TOKEN}`);
    subjects.push(`$KV.${jetStreamName(prefix, "REPLIES")}.${PROBE_TOKEN}`);
  }
  if (needs.historyOnNats) {
    subjects.push(`${prefix}.history.${firstAgent}.${PROBE_TOKEN}`);
    subjects.push(`$KV.${jetStreamName(prefix, "JOURNAL")}.${PROBE_TOKEN}`);
  }
  return subjects;
}

/**
 * Watches the permission errors of a host's start. {@link checkHostPermissions} opens it; the
 * host calls {@link StartPermissionWatch.finish} once everything is subscribed.
 */
export interface StartPermissionWatch {
  /**
   * Waits until the server has answered everything sent so far, then stops watching (later errors
   * are counted in `$SRV.STATS` and logged by the bus).
   * @throws NatsPermissionError for a denial the host cannot run without.
   * Denials of optional subjects (`$SRV.…`, the Agent Protocol's `agents.…`) are passed to `log`.
   */
  finish(log: (line: string) => void): Promise<void>;
  /** Stops watching without checking (the start failed for another reason). */
  stop(): void;
}

/**
 * What a host checks before it starts: every publish family it needs ({@link hostPublishProbes};
 * probes carry {@link PROBE_HEADER} and an expected stream no stream has, so JetStream stores
 * nothing), its own reply inbox, and JetStream's API (`$JS.API.INFO`) when it uses JetStream. The
 * server refuses a publish or subscription without permission asynchronously, so this waits for a
 * round trip and then reads what was refused.
 *
 * @returns a watch that keeps collecting while the host subscribes (its endpoints, the Agent
 *   Protocol), to be finished once it has.
 * @throws NatsPermissionError naming each refused subject, at once (no retries: a refusal is the
 *   server's answer, not a timeout).
 */
export async function checkHostPermissions(
  bus: NatsBus,
  needs: HostPublishNeeds,
): Promise<StartPermissionWatch> {
  const denials: PermissionDenial[] = [];
  const stopWatching = bus.watchPermissionErrors((denial) => denials.push(denial));
  const connection = bus.connection;
  const untilSettled = async (): Promise<void> => {
    await connection.flush();
    // The status stream hands errors over in microtasks after the round trip's reply.
    await new Promise((resolve) => setImmediate(resolve));
  };
  try {
    const probeHeaders = createHeaders();
    probeHeaders.set(PROBE_HEADER, "permissions");
    probeHeaders.set("Nats-Expected-Stream", PROBE_EXPECTED_STREAM);
    for (const subject of hostPublishProbes(needs)) {
      connection.publish(subject, "", { headers: probeHeaders });
    }
    const inbox = connection.subscribe(createConnectionInbox(connection), { callback: () => {} });
    await untilSettled();
    inbox.unsubscribe();
    if (needs.usesJetStream && denials.length === 0) {
      try {
        await connection.request("$JS.API.INFO", "", { timeout: JETSTREAM_PROBE_TIMEOUT_MS });
      } catch {
        // No JetStream, or a slow one, is for the start to handle; a refusal also arrives as a
        // permission error, which the watcher has.
      }
      await untilSettled();
    }
  } catch (error) {
    stopWatching();
    throw error;
  }
  if (denials.length > 0) {
    stopWatching();
    throw new NatsPermissionError(unique(denials), needs.prefix);
  }
  return {
    finish: async (log) => {
      try {
        await untilSettled();
      } finally {
        stopWatching();
      }
      const needed = unique(denials.filter((denial) => !isOptional(denial)));
      if (needed.length > 0) throw new NatsPermissionError(needed, needs.prefix);
      const optional = unique(denials);
      for (const feature of OPTIONAL_FEATURES) {
        const refused = optional.filter((denial) => denial.subject.startsWith(feature.head));
        const first = refused[0];
        if (first === undefined) continue;
        const more = refused.length === 1 ? "" : ` and ${refused.length - 1} more under ${feature.head}`;
        log(
          `${feature.name} will not work: the NATS server refused it (${describeDenial(first)}${more}; grant ${feature.grant}); the host serves its own contract without it`,
        );
      }
    },
    stop: stopWatching,
  };
}

/**
 * The micro-service discovery (`$SRV.…`) and the Agent Protocol (`agents.…`) are extras: the
 * host's own contract works without them, as an operator who never granted them expects.
 */
const OPTIONAL_FEATURES = [
  { head: "$SRV.", name: "$SRV discovery and stats", grant: 'subscribe "$SRV.>"' },
  {
    head: "agents.",
    name: "the Agent Protocol",
    grant: 'subscribe "agents.prompt.*.<owner>.*" and "agents.status.*.<owner>.*", publish "agents.hb.>"',
  },
] as const;

function isOptional(denial: PermissionDenial): boolean {
  return OPTIONAL_FEATURES.some((feature) => denial.subject.startsWith(feature.head));
}

function unique(denials: readonly PermissionDenial[]): PermissionDenial[] {
  const seen = new Map<string, PermissionDenial>();
  for (const denial of denials)
    seen.set(`${denial.operation} ${denial.subject} ${denial.queue ?? ""}`, denial);
  return [...seen.values()];
}
