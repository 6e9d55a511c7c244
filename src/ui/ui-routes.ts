import type { ServerResponse } from "node:http";
import type { NatsConnection } from "@nats-io/transport-node";
import type { AnyStateMachine } from "xstate";
import type { Bus } from "../bus/bus.js";
import { BusTimeoutError, NoRespondersError } from "../bus/bus-errors.js";
import { MAX_PAYLOAD_BYTES } from "../bus/contract.js";
import { replayEvents } from "../bus/event-log.js";
import { chatSubject, controlSubject, isValidName, sessionEventsPattern } from "../bus/subjects.js";
import { describeError } from "../errors/describe-error.js";
import type { AgentEvent } from "../events/types.js";
import type { HttpGuardStats } from "../http/http-guard.js";
import { HttpError, readJsonBody, sendError, sendJson } from "../http/http-io.js";
import type { Route, RouteRequest } from "../http/http-router.js";
import { renderMachine } from "../viz/render-machine.js";
import { listLoggedSessions } from "./logged-sessions.js";
import { type SessionSummary, SessionTracker } from "./session-tracker.js";
import type { SseHub } from "./sse-hub.js";
import { serveStaticFile } from "./static-files.js";
import { describeIssues, UiChatRequest, UiControlRequest } from "./ui-requests.js";

/** What the UI's routes work with: the bus, what was seen on it, and the settings. */
export interface UiContext {
  bus: Bus;
  prefix: string;
  /** When given, session history is replayed from the JetStream event log. */
  natsConnection?: NatsConnection;
  tracker: SessionTracker;
  hub: SseHub;
  machineNames: readonly string[];
  /** A machine's drawing, laid out once; undefined for an unknown name. */
  drawing: (name: string, format: "svg" | "json") => Promise<string> | undefined;
  publicDir: string;
  historyLimit: number;
  chatTimeoutMs: number;
  controlTimeoutMs: number;
  replayTimeoutMs: number;
  /** The HTTP guard's counts: refused requests by rule, open event streams. */
  guardStats: () => HttpGuardStats;
}

/** The UI service's routes. Paths nobody routes are the page's static files. */
export function uiRoutes(ui: UiContext): Route[] {
  return [
    { method: "POST", path: "/api/chat", handle: (request) => postChat(ui, request) },
    { method: "POST", path: "/api/control", handle: (request) => postControl(ui, request) },
    { method: "GET", path: "/api/events", handle: (request) => streamEvents(ui, request) },
    { method: "GET", path: "/api/info", handle: (request) => getInfo(ui, request) },
    {
      method: "GET",
      path: "/api/sessions",
      handle: (request) => listSessions(ui, request),
    },
    {
      method: "GET",
      path: /^\/api\/sessions\/([^/]+)\/([^/]+)\/events$/,
      handle: (request) => getSessionEvents(ui, request),
    },
    {
      method: "GET",
      path: /^\/api\/machines\/([A-Za-z0-9_-]+)\.(svg|json)$/,
      handle: (request) => getMachineDrawing(ui, request),
    },
  ];
}

/** Anything no route takes: a GET of the page's files; 404 under `/api/`. */
export async function serveStatic(ui: UiContext, { request, response, url }: RouteRequest): Promise<void> {
  const path = url.pathname;
  const method = request.method ?? "GET";
  if (method !== "GET" && method !== "HEAD")
    throw new HttpError(405, "method_not_allowed", `${path} takes GET`);
  if (path.startsWith("/api/")) throw new HttpError(404, "not_found", `no route ${path}`);
  if (!(await serveStaticFile(ui.publicDir, path, response))) {
    throw new HttpError(404, "not_found", `no file ${path}`);
  }
}

/** `POST /api/chat`: forwarded to the agent's chat subject. */
async function postChat(ui: UiContext, { request, response }: RouteRequest): Promise<void> {
  const input = await readJsonBody(request, MAX_PAYLOAD_BYTES);
  const parsed = UiChatRequest.safeParse(input);
  if (!parsed.success) throw new HttpError(400, "bad_request", describeIssues(parsed.error, input));
  const { agent, session, text } = parsed.data;
  await forward(ui.bus, response, chatSubject(ui.prefix, agent), { session, text }, ui.chatTimeoutMs);
}

/** `POST /api/control`: forwarded to the agent's control subject. */
async function postControl(ui: UiContext, { request, response }: RouteRequest): Promise<void> {
  const input = await readJsonBody(request, MAX_PAYLOAD_BYTES);
  const parsed = UiControlRequest.safeParse(input);
  if (!parsed.success) throw new HttpError(400, "bad_request", describeIssues(parsed.error, input));
  const { agent, ...command } = parsed.data;
  await forward(ui.bus, response, controlSubject(ui.prefix, agent), command, ui.controlTimeoutMs);
}

/** `GET /api/events[?agent=&session=]`: live events as Server-Sent Events. */
function streamEvents(ui: UiContext, { response, url }: RouteRequest): void {
  const agent = url.searchParams.get("agent");
  const session = url.searchParams.get("session");
  ui.hub.add(
    response,
    (eventAgent, eventSession) =>
      (agent === null || agent === eventAgent) && (session === null || session === eventSession),
  );
}

/** `GET /api/info`: the bus, the prefix, the machines and where history comes from. */
function getInfo(ui: UiContext, { response }: RouteRequest): void {
  sendJson(response, 200, {
    bus: ui.bus.kind,
    prefix: ui.prefix,
    machines: ui.machineNames,
    history: ui.natsConnection ? "jetstream" : "memory",
    http: ui.guardStats(),
  });
}

/** `GET /api/sessions/:agent/:session/events`: the session's recent events. */
async function getSessionEvents(ui: UiContext, { response, params }: RouteRequest): Promise<void> {
  const agent = decodePathPart(params[0] ?? "");
  const session = decodePathPart(params[1] ?? "");
  if (agent === undefined || session === undefined || !isValidName(agent) || !isValidName(session)) {
    throw new HttpError(400, "bad_request", "agent and session must match [A-Za-z0-9_-]{1,64}");
  }
  sendJson(response, 200, { agent, session, ...(await replaySession(ui, agent, session)) });
}

/**
 * `GET /api/sessions[?waiting=1]`: the sessions seen live, most recent first, then those only the
 * event log knows (a UI started later lists them too: a call waiting for approval stays reachable).
 * `waiting=1` keeps only sessions with a call waiting for a decision.
 */
async function listSessions(ui: UiContext, { response, url }: RouteRequest): Promise<void> {
  const sessions: SessionSummary[] = ui.tracker.list().map((summary) => ({ ...summary }));
  if (ui.natsConnection !== undefined) {
    const seen = new Map(sessions.map((summary) => [`${summary.agent}/${summary.session}`, summary]));
    try {
      const logged = await listLoggedSessions(ui.natsConnection, {
        prefix: ui.prefix,
        signal: AbortSignal.timeout(ui.replayTimeoutMs),
      });
      for (const entry of logged) {
        const live = seen.get(`${entry.agent}/${entry.session}`);
        if (live !== undefined) {
          // Seen live from the middle of a chat, the UI may have missed the request: the log has it.
          live.waitingApprovals = Math.max(live.waitingApprovals, entry.waitingApprovals);
          continue;
        }
        sessions.push({
          agent: entry.agent,
          session: entry.session,
          status: "idle",
          state: "",
          states: {},
          lastActivity: "",
          lastKind: "",
          lastSeq: -1,
          chats: entry.chats,
          waitingApprovals: entry.waitingApprovals,
          seenLive: false,
        });
      }
    } catch {
      // No event log yet (no host created it) or it cannot be read: the live sessions still list.
    }
  }
  const waitingOnly = url.searchParams.get("waiting") === "1";
  sendJson(response, 200, {
    sessions: waitingOnly ? sessions.filter((summary) => summary.waitingApprovals > 0) : sessions,
  });
}

/** `GET /api/machines/:name.(svg|json)`: a statechart, drawn or as its graph model. */
async function getMachineDrawing(ui: UiContext, { response, params }: RouteRequest): Promise<void> {
  const name = params[0] ?? "";
  const format = params[1] as "svg" | "json";
  const pending = ui.drawing(name, format);
  if (pending === undefined) throw new HttpError(404, "not_found", `no machine named ${name}`);
  const text = await pending;
  response.writeHead(200, {
    "content-type": format === "svg" ? "image/svg+xml; charset=utf-8" : "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-cache",
  });
  response.end(text);
}

/**
 * A machine's drawing by name and format, laid out once and shared: the machines are static and
 * ELK takes a moment. A failed layout is not kept: the next request tries again (and reports it).
 */
export function createDrawingCache(
  lookupMachine: (name: string) => AnyStateMachine | undefined,
): UiContext["drawing"] {
  const drawings = new Map<string, Promise<string>>();
  return (name, format) => {
    const key = `${name}.${format}`;
    const cached = drawings.get(key);
    if (cached !== undefined) return cached;
    const machine = lookupMachine(name);
    if (machine === undefined) return undefined;
    const text = renderMachine(machine, format, { name });
    drawings.set(key, text);
    text.catch(() => drawings.delete(key));
    return text;
  };
}

/** The session's events from the JetStream log when there is one, else what this process saw. */
async function replaySession(
  ui: UiContext,
  agent: string,
  session: string,
): Promise<{ source: string; events: AgentEvent[] }> {
  const connection = ui.natsConnection;
  if (connection === undefined) return { source: "memory", events: ui.tracker.events(agent, session) };
  // Read the log through a scratch tracker: same delta merging and the same bound as live.
  const scratch = new SessionTracker({ historyLimit: ui.historyLimit, sessionLimit: 1 });
  try {
    for await (const stored of replayEvents(connection, {
      filter: sessionEventsPattern(ui.prefix, agent, session),
      since: { seq: 1 },
      prefix: ui.prefix,
      signal: AbortSignal.timeout(ui.replayTimeoutMs),
    })) {
      // The timeline draws what it knows: kinds newer than this version are left out.
      if (stored.isKnownKind) scratch.record(stored.event);
    }
    return { source: "jetstream", events: scratch.events(agent, session) };
  } catch {
    // No log (no host created it) or a slow server: what this process saw is better than nothing.
    return { source: "memory", events: ui.tracker.events(agent, session) };
  }
}

/**
 * Sends `payload` as a request on `subject` and answers with the reply's JSON; a client that goes
 * away aborts the request. Bus failures become 503 (nobody listens), 504 (timeout) or 502.
 */
async function forward(
  bus: Bus,
  response: ServerResponse,
  subject: string,
  payload: unknown,
  timeoutMs: number,
): Promise<void> {
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
    if (error instanceof NoRespondersError) sendError(response, 503, "unavailable", error.message);
    else if (error instanceof BusTimeoutError) sendError(response, 504, "timeout", error.message);
    else sendError(response, 502, "bus_error", describeError(error));
  } finally {
    response.off("close", onClose);
  }
}

/** A percent-decoded path segment, or undefined for a malformed escape (`%E0%A4%A`): a 400, not a 500. */
function decodePathPart(part: string): string | undefined {
  try {
    return decodeURIComponent(part);
  } catch {
    return undefined;
  }
}
