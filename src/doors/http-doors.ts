import type { HttpDoor } from "../http/http-door.js";
import { createMcpDoor } from "./mcp/mcp-door.js";

/**
 * The protocol doors every agentloop HTTP server offers (`up`, `ui`, `serve --http`), each under its
 * own path prefix and behind the UI's guard. A door reaches the agents over the bus contract, so it
 * works the same whichever host owns a session.
 */
export function createHttpDoors(): HttpDoor[] {
  return [createMcpDoor()];
}
