import type { NatsConnection } from "@nats-io/transport-node";
import { createConnectionInbox } from "../bus/connection-inbox.js";
import { DISCOVERY_SUBJECT, PROTOCOL_SERVICE_NAME, parseProtocolSubject } from "./protocol-subjects.js";
import { isNoResponders, parseJson, ServiceInfo } from "./wire.js";

/** How long discovery collects replies at most, by default. */
export const DEFAULT_DISCOVERY_WINDOW_MS = 2_000;
/** Discovery ends early once no reply came for this long after the last one. */
export const DEFAULT_DISCOVERY_SETTLE_MS = 300;

/** One agent instance as discovery found it (a `$SRV.INFO.agents` reply). */
export interface DiscoveredAgent {
  /** The micro service id: the heartbeat's `instance_id`. */
  id: string;
  /** Metadata `agent`, else the prompt subject's 3rd token. */
  agent: string | undefined;
  /** Metadata `owner`, else the prompt subject's 4th token. */
  owner: string | undefined;
  /** Metadata `session`, else the prompt subject's 5th token (the instance name). */
  name: string | undefined;
  protocolVersion: string | undefined;
  /** Where prompts go (`endpoints[].subject` of `prompt`); undefined when it offers none. */
  promptSubject: string | undefined;
  endpoints: { name: string; subject: string }[];
  /** Every metadata key, unknown ones included. */
  metadata: Record<string, string>;
}

/** Which agent to call: every field given must match (see {@link matchesTarget}). */
export interface AgentTarget {
  agent?: string | undefined;
  owner?: string | undefined;
  name?: string | undefined;
}

export interface DiscoverAgentsOptions {
  /** Upper bound of the collection (default 2 s). */
  windowMs?: number;
  /** Ends after this long without a new reply, once one came (default 300 ms). */
  settleMs?: number;
  signal?: AbortSignal;
}

/**
 * Asks every `agents` service on the system for its info (`$SRV.INFO.agents`) and collects the
 * replies until `settleMs` pass without a new one (or `windowMs` in all). Replies that are not a
 * service info, or of a service not named `agents`, are skipped; each instance appears once. With
 * nobody listening, the server's no-responders status ends the wait at once.
 */
export async function discoverAgents(
  connection: NatsConnection,
  options: DiscoverAgentsOptions = {},
): Promise<DiscoveredAgent[]> {
  const windowMs = options.windowMs ?? DEFAULT_DISCOVERY_WINDOW_MS;
  const settleMs = options.settleMs ?? DEFAULT_DISCOVERY_SETTLE_MS;
  options.signal?.throwIfAborted();
  const found = new Map<string, DiscoveredAgent>();
  const inbox = createConnectionInbox(connection);
  return new Promise<DiscoveredAgent[]>((resolve, reject) => {
    let settleTimer: NodeJS.Timeout | undefined;
    const finish = (error?: unknown): void => {
      clearTimeout(windowTimer);
      clearTimeout(settleTimer);
      options.signal?.removeEventListener("abort", onAbort);
      subscription.unsubscribe();
      if (error !== undefined) reject(error);
      else resolve([...found.values()]);
    };
    const onAbort = (): void => finish(options.signal?.reason);
    const subscription = connection.subscribe(inbox, {
      callback: (error, message) => {
        if (error !== null) return finish(error);
        if (isNoResponders(message)) return finish();
        const info = parseJson(ServiceInfo, message.string());
        const agent = info === undefined ? undefined : toDiscoveredAgent(info);
        if (agent !== undefined) found.set(agent.id, agent);
        clearTimeout(settleTimer);
        settleTimer = setTimeout(() => finish(), settleMs);
      },
    });
    const windowTimer = setTimeout(() => finish(), windowMs);
    options.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      connection.publish(DISCOVERY_SUBJECT, "", { reply: inbox });
    } catch (error) {
      finish(error);
    }
  });
}

/** The discovery record of a service info, or undefined when the service is not an `agents` one. */
export function toDiscoveredAgent(info: ServiceInfo): DiscoveredAgent | undefined {
  if (info.name !== PROTOCOL_SERVICE_NAME) return undefined;
  const metadata = { ...(info.metadata ?? {}) };
  const endpoints = (info.endpoints ?? []).map(({ name, subject }) => ({ name, subject }));
  const promptSubject = endpoints.find((endpoint) => endpoint.name === "prompt")?.subject;
  const address = promptSubject === undefined ? undefined : parseProtocolSubject(promptSubject);
  return {
    id: info.id,
    agent: metadata.agent ?? address?.agent,
    owner: metadata.owner ?? address?.owner,
    name: metadata.session ?? address?.name,
    protocolVersion: metadata.protocol_version,
    promptSubject,
    endpoints,
    metadata,
  };
}

/**
 * True when `found` is the `target`: each given field equals the instance's. `name` matches the
 * session metadata or the 5th token of the prompt subject (they may differ).
 */
export function matchesTarget(found: DiscoveredAgent, target: AgentTarget): boolean {
  if (target.agent !== undefined && target.agent !== found.agent) return false;
  if (target.owner !== undefined && target.owner !== found.owner) return false;
  if (target.name !== undefined) {
    const token =
      found.promptSubject === undefined ? undefined : parseProtocolSubject(found.promptSubject)?.name;
    if (target.name !== found.name && target.name !== token) return false;
  }
  return true;
}

/** `agent/owner/name` for messages (`?` for what is unknown). */
export function describeAgent(found: Pick<DiscoveredAgent, "agent" | "owner" | "name">): string {
  return `${found.agent ?? "?"}/${found.owner ?? "?"}/${found.name ?? "?"}`;
}
