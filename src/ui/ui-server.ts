import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { NatsConnection } from "@nats-io/transport-node";
import type { AnyStateMachine } from "xstate";
import type { Bus } from "../bus/bus.js";
import { allEventsPattern, DEFAULT_PREFIX } from "../bus/subjects.js";
import { describeError } from "../errors/describe-error.js";
import { parseEventJson } from "../events/parse-event.js";
import type { HttpDoor } from "../http/http-door.js";
import {
  createHttpGuard,
  type HttpGuardStats,
  isLoopbackListenHost,
  listLocalAddresses,
} from "../http/http-guard.js";
import { HttpError, sendError } from "../http/http-io.js";
import { createRouter } from "../http/http-router.js";
import { getMachine as getProjectMachine, MACHINE_NAMES } from "../viz/machines.js";
import { SessionTracker } from "./session-tracker.js";
import { SseHub } from "./sse-hub.js";
import { createDrawingCache, serveStatic, type UiContext, uiRoutes } from "./ui-routes.js";

export interface UiServerOptions {
  bus: Bus;
  /** Subject prefix (default `agentloop`). */
  prefix?: string;
  /** 0 (the default) picks a free port. */
  port?: number;
  host?: string;
  /** When given, session history is replayed from the JetStream event log. */
  natsConnection?: NatsConnection;
  /** Machines the page can draw, by name; default: the project's machines. */
  getMachine?: (name: string) => AnyStateMachine | undefined;
  /** Names offered as statechart tabs; default: chat, iteration, session, compaction. */
  machineNames?: readonly string[];
  /** The page's files; default: `public/` next to this module. */
  publicDir?: string;
  /** How long `POST /api/chat` waits for the agent's reply (default 10 min). */
  chatTimeoutMs?: number;
  /** How long `POST /api/control` waits (default 30 s). */
  controlTimeoutMs?: number;
  /** How long a JetStream replay may take (default 10 s). */
  replayTimeoutMs?: number;
  /** SSE keep-alive comment interval (default 15 s). */
  keepAliveMs?: number;
  /** Events kept in memory per session for replay (default 2000; text deltas merged). */
  historyLimit?: number;
  /**
   * The token API calls must carry (`Authorization: Bearer`). Default: none on loopback; a random
   * one when listening on any other address (then in {@link UiServer.url}).
   */
  token?: string;
  /** Host names (or `name:port`) the page may be reached by besides loopback and this machine's addresses. */
  allowedHosts?: readonly string[];
  /** Event streams open at once (default 256). */
  maxStreams?: number;
  /** Event streams open at once from one remote address (default 32). */
  maxStreamsPerAddress?: number;
  /** Where refused requests are reported, one line each (default: nowhere). */
  log?: (line: string) => void;
  /** This machine's addresses (default `os.networkInterfaces()`). */
  localAddresses?: () => string[];
  /** Clock of the refusal log's rate limit (default `Date.now`). */
  now?: () => number;
  /** Protocols served next to the UI (AG-UI, A2A, MCP…), behind the same guard as its API. */
  doors?: readonly HttpDoor[];
}

export interface UiServer {
  /** `http://host:port/`, with `?token=…` when a token is required: the URL to open. */
  url: string;
  /**
   * Every URL the page can be opened at, {@link url} first: when listening on every interface
   * (`0.0.0.0` / `::`), one per address of this machine.
   */
  urls: string[];
  /** The token API calls must carry, or undefined when none is required. */
  token: string | undefined;
  /** True when listening on an address other than loopback. */
  isExposed: boolean;
  /** Refused requests by rule, and the event streams open now. */
  stats(): HttpGuardStats;
  close(): Promise<void>;
}

const DEFAULT_CHAT_TIMEOUT_MS = 10 * 60_000;
const DEFAULT_CONTROL_TIMEOUT_MS = 30_000;
const DEFAULT_REPLAY_TIMEOUT_MS = 10_000;

/**
 * The UI service: the page, the statecharts, live events as Server-Sent Events, the
 * sessions seen on the bus with their recent events, and chat / control forwarded to the agents
 * over the bus contract. node:http only; the routes are a table (./ui-routes.ts).
 */
export async function startUiServer(options: UiServerOptions): Promise<UiServer> {
  const host = options.host ?? "127.0.0.1";
  const doors = options.doors ?? [];
  const doorOf = (path: string) => doors.find((door) => path.startsWith(door.pathPrefix));
  const localAddresses = options.localAddresses ?? listLocalAddresses;
  const guard = createHttpGuard({
    listenHost: host,
    ...(options.token === undefined ? {} : { token: options.token }),
    ...(options.allowedHosts === undefined ? {} : { allowedHosts: options.allowedHosts }),
    ...(options.maxStreams === undefined ? {} : { maxStreams: options.maxStreams }),
    ...(options.maxStreamsPerAddress === undefined
      ? {}
      : { maxStreamsPerAddress: options.maxStreamsPerAddress }),
    ...(options.log === undefined ? {} : { log: options.log }),
    localAddresses,
    ...(options.now === undefined ? {} : { now: options.now }),
    // The page's own files hold no data; everything under /api/ and every door does.
    isPublicPath: (path) => !path.startsWith("/api/") && doorOf(path) === undefined,
    isStreamPath: (path) => path === "/api/events" || doorOf(path)?.isStreamPath?.(path) === true,
  });
  const ui = createUiContext(options, () => guard.stats());
  const subscription = ui.bus.subscribe(allEventsPattern(ui.prefix), (message) => {
    // The timeline draws what it knows: other payloads and kinds newer than this version are skipped.
    const parsed = parseEventJson(message.data);
    if (parsed.status !== "known") return;
    const { event } = parsed;
    ui.tracker.record(event);
    // An SSE `data:` line must not contain a newline; compact JSON never does.
    const json = /[\r\n]/.test(message.data) ? JSON.stringify(event) : message.data;
    ui.hub.broadcast(event.agent, event.session, json);
  });
  const doorContext = {
    bus: ui.bus,
    prefix: ui.prefix,
    ...(ui.natsConnection === undefined ? {} : { natsConnection: ui.natsConnection }),
    openStream: guard.openStream,
  };
  const routes = [...uiRoutes(ui), ...doors.flatMap((door) => door.routes(doorContext))];
  const route = createRouter(routes, (request) => serveStatic(ui, request));
  // The guard answers a request without Host itself (403 with the security headers), not Node.
  const server = createServer(
    { requireHostHeader: false },
    guard.wrap((request, response) => {
      route(request, response).catch((error: unknown) => answerFailure(response, error));
    }),
  );
  try {
    await listen(server, options.port ?? 0, host);
  } catch (error) {
    // Not listening (the port is taken…): nothing may outlive the failed start.
    subscription.unsubscribe();
    ui.hub.close();
    await Promise.all(doors.map((door) => door.close?.()));
    throw error;
  }
  const { port } = server.address() as AddressInfo;
  const query = guard.token === undefined ? "" : `?token=${encodeURIComponent(guard.token)}`;
  const urls = shownHosts(host, localAddresses).map((shown) => `http://${shown}:${port}/${query}`);
  let closing: Promise<void> | undefined;
  return {
    url: urls[0]!,
    urls,
    token: guard.token,
    isExposed: !isLoopbackListenHost(host),
    stats: () => guard.stats(),
    close() {
      closing ??= (async () => {
        subscription.unsubscribe();
        ui.hub.close();
        await Promise.all(doors.map((door) => door.close?.()));
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })();
      return closing;
    },
  };
}

/** The options with their defaults, and the state the routes share. */
function createUiContext(options: UiServerOptions, guardStats: () => HttpGuardStats): UiContext {
  const historyLimit = options.historyLimit ?? 2_000;
  return {
    bus: options.bus,
    prefix: options.prefix ?? DEFAULT_PREFIX,
    ...(options.natsConnection === undefined ? {} : { natsConnection: options.natsConnection }),
    tracker: new SessionTracker({ historyLimit }),
    hub: new SseHub(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }),
    machineNames: options.machineNames ?? MACHINE_NAMES,
    drawing: createDrawingCache(options.getMachine ?? getProjectMachine),
    publicDir: options.publicDir ?? fileURLToPath(new URL("./public/", import.meta.url)),
    historyLimit,
    chatTimeoutMs: options.chatTimeoutMs ?? DEFAULT_CHAT_TIMEOUT_MS,
    controlTimeoutMs: options.controlTimeoutMs ?? DEFAULT_CONTROL_TIMEOUT_MS,
    replayTimeoutMs: options.replayTimeoutMs ?? DEFAULT_REPLAY_TIMEOUT_MS,
    guardStats,
  };
}

/** A failed request: its error as JSON, or a cut connection once the answer had begun. */
function answerFailure(response: ServerResponse, error: unknown): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  if (error instanceof HttpError) sendError(response, error.status, error.responseCode, error.message);
  else sendError(response, 500, "internal", describeError(error));
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/**
 * The hosts a URL can show for a listening address, IPv6 in brackets: the address itself, or for
 * a wildcard, loopback first, then this machine's other addresses (link-local IPv6 left out: it
 * needs a zone no browser takes in a URL).
 */
function shownHosts(host: string, localAddresses: () => string[]): string[] {
  const bracketed = (address: string) => (address.includes(":") ? `[${address}]` : address);
  if (host !== "0.0.0.0" && host !== "::") return [bracketed(host)];
  const others = localAddresses().filter(
    (address) =>
      !isLoopbackListenHost(address) && !/^fe80:/i.test(address) && (host === "::" || !address.includes(":")),
  );
  return ["127.0.0.1", ...new Set(others)].map(bracketed);
}
