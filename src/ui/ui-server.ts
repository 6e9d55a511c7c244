import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { NatsConnection } from "@nats-io/transport-node";
import type { AnyStateMachine } from "xstate";
import type { Bus } from "../bus/bus.js";
import { allEventsPattern, DEFAULT_PREFIX } from "../bus/subjects.js";
import { describeError } from "../errors/describe-error.js";
import { parseEventJson } from "../events/parse-event.js";
import { getMachine as getProjectMachine, MACHINE_NAMES } from "../viz/machines.js";
import { HttpError, sendError } from "./http-io.js";
import { SessionTracker } from "./session-tracker.js";
import { SseHub } from "./sse-hub.js";
import { createRouter } from "./ui-router.js";
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
}

export interface UiServer {
  /** `http://host:port/`. */
  url: string;
  close(): Promise<void>;
}

const DEFAULT_CHAT_TIMEOUT_MS = 10 * 60_000;
const DEFAULT_CONTROL_TIMEOUT_MS = 30_000;
const DEFAULT_REPLAY_TIMEOUT_MS = 10_000;

/**
 * The UI service (SPEC §13): the page, the statecharts, live events as Server-Sent Events, the
 * sessions seen on the bus with their recent events, and chat / control forwarded to the agents
 * over the bus contract. node:http only; the routes are a table (./ui-routes.ts).
 */
export async function startUiServer(options: UiServerOptions): Promise<UiServer> {
  const ui = createUiContext(options);
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
  const route = createRouter(uiRoutes(ui), (request) => serveStatic(ui, request));
  const server = createServer((request, response) => {
    route(request, response).catch((error: unknown) => answerFailure(response, error));
  });
  const host = options.host ?? "127.0.0.1";
  await listen(server, options.port ?? 0, host);
  let closing: Promise<void> | undefined;
  return {
    url: `http://${shownHost(host)}:${(server.address() as AddressInfo).port}/`,
    close() {
      closing ??= (async () => {
        subscription.unsubscribe();
        ui.hub.close();
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
function createUiContext(options: UiServerOptions): UiContext {
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
  };
}

/** A failed request: its error as JSON, or a cut connection once the answer had begun. */
function answerFailure(response: ServerResponse, error: unknown): void {
  if (response.headersSent) {
    response.destroy();
    return;
  }
  if (error instanceof HttpError) sendError(response, error.status, error.code, error.message);
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

/** The host as a URL shows it: a wildcard address as loopback, IPv6 in brackets. */
function shownHost(host: string): string {
  if (host === "0.0.0.0" || host === "::") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}
