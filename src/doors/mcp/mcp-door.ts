import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ErrorCode, isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { MAX_PAYLOAD_BYTES } from "../../bus/contract.js";
import type { HttpDoor, HttpDoorContext } from "../../http/http-door.js";
import { HttpError, readJsonBody, sendJson } from "../../http/http-io.js";
import type { RouteRequest } from "../../http/http-router.js";
import { createAgentCatalog } from "./agent-catalog.js";
import { AgentTaskStore } from "./agent-task-store.js";
import { createMcpAgentServer } from "./mcp-agent-server.js";

/** The endpoint of the Streamable HTTP transport. */
export const MCP_PATH = "/mcp";
/** MCP sessions open at once; past it the least recently used one is closed. */
const DEFAULT_MAX_SESSIONS = 256;
/** A session unused this long is closed (a client that went away without `DELETE`). */
const DEFAULT_SESSION_IDLE_MS = 30 * 60_000;
/** The Streamable HTTP spec's header naming the session. */
const SESSION_HEADER = "mcp-session-id";

export interface McpDoorOptions {
  /** A fixed agent list instead of discovery (the in-process bus has no `$SRV` to discover on). */
  agents?: readonly string[];
  /**
   * The agents this process serves, listed when the door has no NATS connection (the in-process
   * bus of `up` without a NATS server has no `$SRV` to discover them on). On NATS, discovery sees
   * every host's agents and this is unused.
   */
  localAgents?: readonly string[];
  maxSessions?: number;
  sessionIdleMs?: number;
  now?: () => number;
}

interface McpSession {
  transport: StreamableHTTPServerTransport;
  server: Server;
  usedAt: number;
}

/**
 * agentloop as an MCP server over Streamable HTTP at `POST /mcp` (`GET /mcp` for a session's
 * server-to-client stream, `DELETE /mcp` to end it), next to the UI and behind its guard. **With sessions**: `initialize`
 * opens one (its id in `Mcp-Session-Id`), later requests carry it. Sessions are what let the
 * server ask the client something mid-call (an approval as an elicitation) and get the answer
 * back on the same connection; tasks live in one store for the whole door.
 *
 * Errors are JSON-RPC error objects: a body that is not JSON is `-32700`, a request without a
 * session that is not `initialize` `-32000`, an unknown or expired session a 404 with `-32001`.
 */
export function createMcpDoor(options: McpDoorOptions = {}): HttpDoor {
  const now = options.now ?? Date.now;
  const maxSessions = options.maxSessions ?? DEFAULT_MAX_SESSIONS;
  const idleMs = options.sessionIdleMs ?? DEFAULT_SESSION_IDLE_MS;
  const sessions = new Map<string, McpSession>();
  const taskStore = new AgentTaskStore();

  const closeSession = (id: string) => {
    const session = sessions.get(id);
    if (session === undefined) return;
    sessions.delete(id);
    void session.transport.close().catch(() => {});
    void session.server.close().catch(() => {});
  };
  /** Room for one more: idle sessions go first, then the least recently used. */
  const makeRoom = () => {
    for (const [id, session] of sessions) if (now() - session.usedAt > idleMs) closeSession(id);
    while (sessions.size >= maxSessions) {
      const oldest = [...sessions.entries()].sort((a, b) => a[1].usedAt - b[1].usedAt)[0];
      if (oldest === undefined) break;
      closeSession(oldest[0]);
    }
  };

  return {
    name: "mcp",
    pathPrefix: MCP_PATH,
    // Only what holds its response open counts against the stream caps (claimed in the handlers):
    // a session's GET stream, and the calls that wait on a chat. tools/list and the like do not.
    routes(context: HttpDoorContext) {
      const fixed =
        options.agents ?? (context.natsConnection === undefined ? options.localAgents : undefined);
      const catalog = createAgentCatalog({
        prefix: context.prefix,
        ...(context.natsConnection === undefined ? {} : { connection: context.natsConnection }),
        ...(fixed === undefined ? {} : { agents: fixed }),
      });
      const openSession = async (): Promise<StreamableHTTPServerTransport> => {
        makeRoom();
        const server = createMcpAgentServer({ bus: context.bus, prefix: context.prefix, catalog, taskStore });
        const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => {
            sessions.set(id, { transport, server, usedAt: now() });
          },
        });
        transport.onclose = () => {
          if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
        };
        await server.connect(transport);
        return transport;
      };
      const sessionOf = (request: RouteRequest): McpSession | "none" | "unknown" => {
        const id = request.request.headers[SESSION_HEADER];
        if (typeof id !== "string" || id === "") return "none";
        const session = sessions.get(id);
        if (session === undefined) return "unknown";
        session.usedAt = now();
        return session;
      };
      return [
        {
          method: "POST",
          path: MCP_PATH,
          handle: async (request) => {
            let body: unknown;
            try {
              body = await readJsonBody(request.request, MAX_PAYLOAD_BYTES);
            } catch (error) {
              if (!(error instanceof HttpError)) throw error;
              return sendRpcError(request.response, error.status ?? 400, ErrorCode.ParseError, error.message);
            }
            const session = sessionOf(request);
            if (session === "unknown") return sendSessionNotFound(request.response);
            if (waitsOnChat(body)) {
              const refused = context.openStream(request.request, request.response);
              if (refused !== undefined) return sendOverloaded(request.response, refused);
            }
            if (session === "none") {
              if (!isInitializeRequest(body)) {
                return sendRpcError(
                  request.response,
                  400,
                  -32000,
                  `no session: send "initialize" first, then every request with its ${SESSION_HEADER} header`,
                );
              }
              const transport = await openSession();
              return transport.handleRequest(request.request, request.response, body);
            }
            return session.transport.handleRequest(request.request, request.response, body);
          },
        },
        {
          method: "GET",
          path: MCP_PATH,
          handle: async (request) => {
            const session = sessionOf(request);
            if (session === "unknown") return sendSessionNotFound(request.response);
            if (session === "none") {
              return sendRpcError(
                request.response,
                400,
                -32000,
                `a GET stream needs the ${SESSION_HEADER} header`,
              );
            }
            const refused = context.openStream(request.request, request.response);
            if (refused !== undefined) return sendOverloaded(request.response, refused);
            return session.transport.handleRequest(request.request, request.response);
          },
        },
        {
          // The client ends its session (Streamable HTTP's session termination).
          method: "DELETE",
          path: MCP_PATH,
          handle: async (request) => {
            const session = sessionOf(request);
            if (session === "unknown") return sendSessionNotFound(request.response);
            if (session === "none") {
              return sendRpcError(request.response, 400, -32000, `DELETE needs the ${SESSION_HEADER} header`);
            }
            return session.transport.handleRequest(request.request, request.response);
          },
        },
      ];
    },
    async close() {
      for (const id of [...sessions.keys()]) closeSession(id);
      taskStore.cleanup();
    },
  };
}

function sendRpcError(response: ServerResponse, status: number, code: number, message: string): void {
  sendJson(response, status, { jsonrpc: "2.0", error: { code, message }, id: null });
}

function sendOverloaded(response: ServerResponse, reason: string): void {
  sendRpcError(response, 503, -32000, `overloaded: ${reason}`);
}

/** The methods whose answer waits on a chat (its response stays open meanwhile). */
const CHAT_METHODS: ReadonlySet<string> = new Set(["tools/call", "tasks/result"]);

/** Whether the body (a message or a batch) holds a request whose answer waits on a chat. */
function waitsOnChat(body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body];
  return messages.some(
    (message) =>
      typeof message === "object" &&
      message !== null &&
      CHAT_METHODS.has(String((message as { method?: unknown }).method)),
  );
}

function sendSessionNotFound(response: ServerResponse): void {
  sendRpcError(response, 404, -32001, "session not found (it expired or was closed): initialize a new one");
}
