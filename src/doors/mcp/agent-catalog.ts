import type { NatsConnection } from "@nats-io/transport-node";
import { isValidName } from "../../bus/subjects.js";
import { discoverAgents } from "../../protocol/discovery.js";
import { CONTRACT_PREFIX_METADATA } from "../../protocol/protocol-subjects.js";

/** How long one discovery collects replies at most. */
const DISCOVERY_WINDOW_MS = 1_500;
/** A listing is reused this long: `tools/list` and the calls right after it share one discovery. */
const DEFAULT_CACHE_MS = 5_000;

/** The agents a door offers: the names its callers may chat with. */
export interface AgentCatalog {
  /** Every agent's name, sorted. */
  list(): Promise<string[]>;
  /** Whether `agent` is among them (a fresh discovery when the cached listing lacks it). */
  has(agent: string): Promise<boolean>;
}

export interface AgentCatalogOptions {
  /** The contract's prefix: only agents served under it are listed. */
  prefix: string;
  /** On NATS: the agents are discovered from the hosts' `$SRV` services. */
  connection?: NatsConnection;
  /** A fixed list instead (the in-process bus has no `$SRV`); wins over discovery. */
  agents?: readonly string[];
  cacheMs?: number;
  now?: () => number;
}

/**
 * The agents of the system, as every agentloop host announces them: each registers an Agent
 * Protocol service per agent (`$SRV.INFO.agents`) whose metadata names the agent and the prefix of
 * our contract it is served under. So whichever hosts run, and however many, the list is theirs
 * together, and a host that stops drops out of the next listing.
 */
export function createAgentCatalog(options: AgentCatalogOptions): AgentCatalog {
  const now = options.now ?? Date.now;
  const cacheMs = options.cacheMs ?? DEFAULT_CACHE_MS;
  let cached: { agents: string[]; at: number } | undefined;
  let discovering: Promise<string[]> | undefined;

  const discover = async (): Promise<string[]> => {
    if (options.agents !== undefined) return [...options.agents].sort();
    if (options.connection === undefined) return [];
    const found = await discoverAgents(options.connection, { windowMs: DISCOVERY_WINDOW_MS });
    const names = new Set<string>();
    for (const agent of found) {
      if (agent.metadata[CONTRACT_PREFIX_METADATA] !== options.prefix) continue;
      if (isValidName(agent.agent)) names.add(agent.agent);
    }
    return [...names].sort();
  };
  const refresh = (): Promise<string[]> => {
    discovering ??= discover()
      .then((agents) => {
        cached = { agents, at: now() };
        return agents;
      })
      .finally(() => {
        discovering = undefined;
      });
    return discovering;
  };
  const list = async (): Promise<string[]> => {
    if (cached !== undefined && now() - cached.at < cacheMs) return cached.agents;
    return refresh();
  };
  return {
    list,
    async has(agent) {
      if ((await list()).includes(agent)) return true;
      // A host that started since the last listing: asked once more before saying no.
      return (await refresh()).includes(agent);
    },
  };
}
