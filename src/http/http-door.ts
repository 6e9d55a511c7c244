import type { IncomingMessage, ServerResponse } from "node:http";
import type { NatsConnection } from "@nats-io/transport-node";
import type { Bus } from "../bus/bus.js";
import type { Route } from "./http-router.js";

/**
 * What a door works with: the bus it reaches the agents through (the same NATS contract every
 * other caller uses, so a door works against any host of the system), and, on NATS, the connection
 * for JetStream (replaying a session's events after a reconnect).
 */
export interface HttpDoorContext {
  bus: Bus;
  /** Subject prefix (default `agentloop`). */
  prefix: string;
  /** Present on NATS; absent on the in-process bus (no JetStream there). */
  natsConnection?: NatsConnection;
  /**
   * Counts `response` against the server's stream caps until it closes, for a door that learns
   * only from the body that it will stream (paths it names in {@link HttpDoor.isStreamPath} are
   * counted before the handler runs). Undefined when taken, else why not: the door answers that in
   * its own protocol's shape.
   */
  openStream(request: IncomingMessage, response: ServerResponse): string | undefined;
}

/**
 * A protocol served on agentloop's HTTP server next to the UI (AG-UI, A2A, MCP…). Every path under
 * {@link pathPrefix} is behind the same rules as the UI's API: Host and Origin checked, and the
 * token required whenever the server asks for one.
 *
 * @example
 * ```ts
 * const echoDoor: HttpDoor = {
 *   name: "echo",
 *   pathPrefix: "/echo/",
 *   routes: () => [
 *     { method: "GET", path: "/echo/ping", handle: ({ response }) => void response.end("pong") },
 *   ],
 * };
 * ```
 */
export interface HttpDoor {
  /** Shown in logs and `/api/info`. */
  name: string;
  /** Every path that starts with it belongs to this door, e.g. `/agui/`. */
  pathPrefix: string;
  /**
   * Whether every request to this path opens a long-lived stream (SSE): those count against the
   * server's stream caps. Default: none do. A path that streams only for some bodies calls
   * {@link HttpDoorContext.openStream} instead.
   */
  isStreamPath?(path: string): boolean;
  /** The door's routes, made once when the server starts. */
  routes(context: HttpDoorContext): Route[];
  /** Ends the door's streams and subscriptions; called when the server closes. */
  close?(): Promise<void>;
}
