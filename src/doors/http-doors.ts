import type { HttpDoor } from "../http/http-door.js";
import type { A2aAgentProfile } from "./a2a/a2a-agents.js";
import { createA2aDoor } from "./a2a/a2a-door.js";
import { createAguiDoor } from "./agui/agui-door.js";
import { createMcpDoor } from "./mcp/mcp-door.js";

/** What the doors may show of the agents (from the agents file the hosts share). */
export interface HttpDoorsOptions {
  /**
   * The agents' A2A profiles (cards); none: every agent is not found at the A2A door. Their names
   * are also the MCP door's tools on the in-process bus, where there is no `$SRV` to discover on.
   */
  a2aAgents?: readonly A2aAgentProfile[];
}

/**
 * The protocol doors every agentloop HTTP server offers (`up`, `ui`, `serve --http`), each under its
 * own path prefix and behind the UI's guard. A door reaches the agents over the bus contract, so it
 * works the same whichever host owns a session.
 */
export function createHttpDoors(options: HttpDoorsOptions = {}): HttpDoor[] {
  const agents = options.a2aAgents ?? [];
  return [
    createAguiDoor(),
    createA2aDoor({ agents }),
    createMcpDoor({ localAgents: agents.map((agent) => agent.name) }),
  ];
}
