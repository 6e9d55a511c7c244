import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import type { NatsConnection } from "@nats-io/transport-node";
import type { AnyStateMachine } from "xstate";
import type { Bus } from "../bus/bus.js";
import { BusTimeoutError, NoRespondersError } from "../bus/bus-errors.js";
import { MAX_PAYLOAD_BYTES } from "../bus/contract.js";
import { replayEvents } from "../bus/event-log.js";
import {
  allEventsPattern,
  chatSubject,
  controlSubject,
  DEFAULT_PREFIX,
  isValidName,
  sessionEventsPattern,
} from "../bus/subjects.js";
import { parseEventJson } from "../events/parse-event.js";
import type { AgentEvent } from "../events/types.js";
import { getMachine as getProjectMachine, MACHINE_NAMES } from "../viz/machines.js";
import { renderMachine } from "../viz/render-machine.js";
import { HttpError, readJsonBody, sendError, sendJson } from "./http-io.js";
import { SessionTracker } from "./session-tracker.js";
import { SseHub } from "./sse-hub.js";
import { serveStaticFile } from "./static-files.js";
import { describeIssues, UiChatRequest, UiControlRequest } from "./ui-requests.js";

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
 * over the bus contract. node:http only.
 */
export async function startUiServer(options: UiServerOptions): Promise<UiServer> {
  const { bus } = options;
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const host = options.host ?? "127.0.0.1";
  const publicDir = options.publicDir ?? fileURLToPath(new URL("./public/", import.meta.url));
  const lookupMachine = options.getMachine ?? getProjectMachine;
  const machineNames = options.machineNames ?? MACHINE_NAMES;
  const historyLimit = options.historyLimit ?? 2_000;
  const tracker = new SessionTracker({ historyLimit });
  const hub = new SseHub(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs });
  // The machines are static: each drawing is laid out once (ELK takes a moment) and shared.
  const drawings = new Map<string, Promise<string>>();

  const subscription = bus.subscribe(allEventsPattern(prefix), (message) => {
    // The timeline draws what it knows: other payloads and kinds newer than this version are skipped.
    const parsed = parseEventJson(message.data);
    if (parsed.status !== "known") return;
    const { event } = parsed;
    tracker.record(event);
    // An SSE `data:` line must not contain a newline; compact JSON never does.
    const json = /[\r\n]/.test(message.data) ? JSON.stringify(event) : message.data;
    hub.broadcast(event.agent, event.session, json);
  });

  const drawing = (name: string, format: "svg" | "json"): Promise<string> | undefined => {
    const key = `${name}.${format}`;
    const cached = drawings.get(key);
    if (cached !== undefined) return cached;
    const machine = lookupMachine(name);
    if (machine === undefined) return undefined;
    const text = renderMachine(machine, format, { name });
    drawings.set(key, text);
    // A failed layout is not cached: the next request tries again (and reports the error).
    text.catch(() => drawings.delete(key));
    return text;
  };

  const replay = async (
    agent: string,
    session: string,
  ): Promise<{ source: string; events: AgentEvent[] }> => {
    const connection = options.natsConnection;
    if (connection === undefined) return { source: "memory", events: tracker.events(agent, session) };
    // Read the log through a scratch tracker: same delta merging and the same bound as live.
    const scratch = new SessionTracker({ historyLimit, sessionLimit: 1 });
    const signal = AbortSignal.timeout(options.replayTimeoutMs ?? DEFAULT_REPLAY_TIMEOUT_MS);
    try {
      for await (const stored of replayEvents(connection, {
        filter: sessionEventsPattern(prefix, agent, session),
        since: { seq: 1 },
        prefix,
        signal,
      })) {
        if (stored.isKnownKind) scratch.record(stored.event);
      }
      return { source: "jetstream", events: scratch.events(agent, session) };
    } catch {
      // No log (no host created it) or a slow server: what this process saw is better than nothing.
      return { source: "memory", events: tracker.events(agent, session) };
    }
  };

  const forward = async (
    response: ServerResponse,
    subject: string,
    payload: unknown,
    timeoutMs: number,
  ): Promise<void> => {
    const abort = new AbortController();
    const onClose = (): void => {
      if (!response.writableFinished) abort.abort();
    };
    response.on("close", onClose);
    try {
      const reply = await bus.request(subject, JSON.stringify(payload), { timeoutMs, signal: abort.signal });
      let body: unknown;
      try {
        body = JSON.parse(reply.data);
      } catch {
        sendError(response, 502, "bad_reply", `the reply on ${subject} is not JSON`);
        return;
      }
      sendJson(response, 200, body);
    } catch (error) {
      if (abort.signal.aborted) return;
      if (error instanceof NoRespondersError) {
        sendError(response, 503, "unavailable", error.message);
      } else if (error instanceof BusTimeoutError) {
        sendError(response, 504, "timeout", error.message);
      } else {
        sendError(response, 502, "bus_error", error instanceof Error ? error.message : String(error));
      }
    } finally {
      response.off("close", onClose);
    }
  };

  const route = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const url = new URL(request.url ?? "/", "http://localhost");
    const path = url.pathname;
    const method = request.method ?? "GET";

    if (path === "/api/chat" || path === "/api/control") {
      if (method !== "POST") throw new HttpError(405, "method_not_allowed", `${path} takes POST`);
      const input = await readJsonBody(request, MAX_PAYLOAD_BYTES);
      if (path === "/api/chat") {
        const parsed = UiChatRequest.safeParse(input);
        if (!parsed.success) throw new HttpError(400, "bad_request", describeIssues(parsed.error, input));
        const { agent, session, text } = parsed.data;
        await forward(
          response,
          chatSubject(prefix, agent),
          { session, text },
          options.chatTimeoutMs ?? DEFAULT_CHAT_TIMEOUT_MS,
        );
        return;
      }
      const parsed = UiControlRequest.safeParse(input);
      if (!parsed.success) throw new HttpError(400, "bad_request", describeIssues(parsed.error, input));
      const { agent, ...command } = parsed.data;
      await forward(
        response,
        controlSubject(prefix, agent),
        command,
        options.controlTimeoutMs ?? DEFAULT_CONTROL_TIMEOUT_MS,
      );
      return;
    }

    if (method !== "GET" && method !== "HEAD")
      throw new HttpError(405, "method_not_allowed", `${path} takes GET`);

    if (path === "/api/events") {
      const agent = url.searchParams.get("agent");
      const session = url.searchParams.get("session");
      hub.add(
        response,
        (eventAgent, eventSession) =>
          (agent === null || agent === eventAgent) && (session === null || session === eventSession),
      );
      return;
    }
    if (path === "/api/info") {
      sendJson(response, 200, {
        bus: bus.kind,
        prefix,
        machines: machineNames,
        history: options.natsConnection ? "jetstream" : "memory",
      });
      return;
    }
    if (path === "/api/sessions") {
      sendJson(response, 200, { sessions: tracker.list() });
      return;
    }
    const sessionEvents = /^\/api\/sessions\/([^/]+)\/([^/]+)\/events$/.exec(path);
    if (sessionEvents) {
      const agent = decodePathPart(sessionEvents[1]!);
      const session = decodePathPart(sessionEvents[2]!);
      if (agent === undefined || session === undefined || !isValidName(agent) || !isValidName(session)) {
        throw new HttpError(400, "bad_request", "agent and session must match [A-Za-z0-9_-]{1,64}");
      }
      sendJson(response, 200, { agent, session, ...(await replay(agent, session)) });
      return;
    }
    const machine = /^\/api\/machines\/([A-Za-z0-9_-]+)\.(svg|json)$/.exec(path);
    if (machine) {
      const format = machine[2] as "svg" | "json";
      const pending = drawing(machine[1]!, format);
      if (pending === undefined) throw new HttpError(404, "not_found", `no machine named ${machine[1]}`);
      const text = await pending;
      response.writeHead(200, {
        "content-type": format === "svg" ? "image/svg+xml; charset=utf-8" : "application/json; charset=utf-8",
        "content-length": Buffer.byteLength(text),
        "cache-control": "no-cache",
      });
      response.end(text);
      return;
    }
    if (path.startsWith("/api/")) throw new HttpError(404, "not_found", `no route ${path}`);
    if (!(await serveStaticFile(publicDir, path, response)))
      throw new HttpError(404, "not_found", `no file ${path}`);
  };

  const server = createServer((request, response) => {
    route(request, response).catch((error: unknown) => {
      if (response.headersSent) {
        response.destroy();
        return;
      }
      if (error instanceof HttpError) sendError(response, error.status, error.code, error.message);
      else sendError(response, 500, "internal", error instanceof Error ? error.message : String(error));
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const shownHost =
    host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  let closing: Promise<void> | undefined;

  return {
    url: `http://${shownHost}:${address.port}/`,
    close() {
      closing ??= (async () => {
        subscription.unsubscribe();
        hub.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })();
      return closing;
    },
  };
}

/** A percent-decoded path segment, or undefined for a malformed escape (`%E0%A4%A`): a 400, not a 500. */
function decodePathPart(part: string): string | undefined {
  try {
    return decodeURIComponent(part);
  } catch {
    return undefined;
  }
}
