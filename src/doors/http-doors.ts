import type { HttpDoor } from "../http/http-door.js";
import type { A2aAgentProfile } from "./a2a/a2a-agents.js";
import { createA2aDoor } from "./a2a/a2a-door.js";
import { createAguiDoor } from "./agui/agui-door.js";

/** What the doors may show of the agents (from the agents file the hosts share). */
export interface HttpDoorsOptions {
  /** The agents' A2A profiles (cards); none: every agent is not found at the A2A door. */
  a2aAgents?: readonly A2aAgentProfile[];
}

import { createMcpDoor } from "./mcp/mcp-door.js";

/**
 * The protocol doors every agentloop HTTP server offers (`up`, `ui`, `serve --http`), each under its
 * own path prefix and behind the UI's guard. A door reaches the agents over the bus contract, so it
 * works the same whichever host owns a session.
 */
export function createHttpDoors(options: HttpDoorsOptions = {}): HttpDoor[] {
  return [createAguiDoor(), createA2aDoor({ agents: options.a2aAgents ?? [] }), createMcpDoor()];
}
