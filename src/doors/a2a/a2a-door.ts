import type { IncomingMessage, ServerResponse } from "node:http";
import {
  A2A_PROTOCOL_VERSION,
  A2A_VERSION_HEADER,
  AgentCard,
  formatSSEErrorEvent,
  formatSSEEvent,
  ListTasksResponse,
  SendMessageRequest,
  SSE_HEADERS,
  StreamResponse,
  Task,
  TaskState,
  taskStateFromJSON,
} from "@a2a-js/sdk";
import {
  A2A_ERROR_CODE,
  RequestMalformedError,
  restStatusFor,
  toJsonRpcError,
  toRestErrorBody,
  UnsupportedOperationError,
  VersionNotSupportedError,
} from "@a2a-js/sdk/errors";
import { JsonRpcTransportHandler, ServerCallContext } from "@a2a-js/sdk/server";
import { MAX_PAYLOAD_BYTES } from "../../bus/contract.js";
import { isValidName } from "../../bus/subjects.js";
import { describeError } from "../../errors/describe-error.js";
import type { HttpDoor, HttpDoorContext } from "../../http/http-door.js";
import type { Route, RouteRequest } from "../../http/http-router.js";
import type { A2aAgentProfile } from "./a2a-agents.js";
import { A2aAgentHandler } from "./a2a-request-handler.js";
import { TaskLog } from "./task-log.js";

/** Where the door lives: `/a2a/<agent>/…`. */
const PATH_PREFIX = "/a2a/";
const CARD_PATH = /^\/a2a\/([^/]+)\/\.well-known\/agent-card\.json$/;
const JSON_RPC_PATH = /^\/a2a\/([^/]+)\/jsonrpc$/;
const REST_PATH = /^\/a2a\/([^/]+)\/rest\/(.+)$/;
/** The JSON-RPC methods answered with a stream (SSE). */
const STREAMING_METHODS: ReadonlySet<string> = new Set(["SendStreamingMessage", "SubscribeToTask"]);

export interface A2aDoorOptions {
  /** The agents the door shows (their cards); any other name is not found. */
  agents: readonly A2aAgentProfile[] | (() => readonly A2aAgentProfile[]);
}

/**
 * The A2A v1.0 door: per agent an Agent Card at `/a2a/<agent>/.well-known/agent-card.json`, the
 * JSON-RPC binding at `POST /a2a/<agent>/jsonrpc` and the HTTP+JSON binding under
 * `/a2a/<agent>/rest/` (`message:send`, `message:stream`, `tasks`, `tasks/<id>`,
 * `tasks/<id>:cancel`, `tasks/<id>:subscribe`). A task is one chat, its context the session; its
 * state is read from NATS (the KV of tasks, the JetStream event log), so it needs a NATS bus.
 */
export function createA2aDoor(options: A2aDoorOptions): HttpDoor {
  const closing = new AbortController();
  const profiles =
    typeof options.agents === "function"
      ? options.agents
      : () => options.agents as readonly A2aAgentProfile[];
  return {
    name: "a2a",
    pathPrefix: PATH_PREFIX,
    // The JSON-RPC path streams only for its streaming methods: those claim a stream themselves.
    isStreamPath: (path) => /\/rest\/(message:stream|tasks\/[^/]+:subscribe)$/.test(path),
    routes: (context) => a2aRoutes(context, profiles, closing.signal),
    close: async () => closing.abort(),
  };
}

function a2aRoutes(
  context: HttpDoorContext,
  profiles: () => readonly A2aAgentProfile[],
  closed: AbortSignal,
): Route[] {
  let taskLog: Promise<TaskLog> | undefined;
  const openLog = (): Promise<TaskLog> => {
    const connection = context.natsConnection;
    if (connection === undefined) {
      return Promise.reject(
        new UnsupportedOperationError(
          "A2A tasks need NATS with JetStream (their state is read from the event log)",
        ),
      );
    }
    taskLog ??= TaskLog.open(connection, context.prefix).catch((error: unknown) => {
      taskLog = undefined;
      throw new UnsupportedOperationError(`A2A tasks need JetStream: ${describeError(error)}`);
    });
    return taskLog;
  };
  const handlerFor = async (request: RouteRequest): Promise<A2aAgentHandler | undefined> => {
    const profile = findProfile(profiles(), request.params[0] ?? "");
    if (profile === undefined) return undefined;
    const log = await openLog();
    return new A2aAgentHandler({
      agent: profile.name,
      bus: context.bus,
      prefix: context.prefix,
      log,
      closed: AbortSignal.any([closed, clientGone(request.response)]),
      doorClosed: closed,
      card: () => agentCard(profile, baseUrl(request.request)),
    });
  };
  return [
    {
      method: "GET",
      path: CARD_PATH,
      handle: (request) => {
        const profile = findProfile(profiles(), request.params[0] ?? "");
        if (profile === undefined) return sendNotFound(request);
        sendA2aJson(request.response, 200, AgentCard.toJSON(agentCard(profile, baseUrl(request.request))));
      },
    },
    {
      method: "POST",
      path: JSON_RPC_PATH,
      handle: (request) => handleJsonRpc(request, handlerFor, context.openStream),
    },
    { method: "POST", path: REST_PATH, handle: (request) => handleRest(request, handlerFor) },
    { method: "GET", path: REST_PATH, handle: (request) => handleRest(request, handlerFor) },
  ];
}

function findProfile(profiles: readonly A2aAgentProfile[], raw: string): A2aAgentProfile | undefined {
  let name: string;
  try {
    name = decodeURIComponent(raw);
  } catch {
    return undefined;
  }
  if (!isValidName(name)) return undefined;
  return profiles.find((profile) => profile.name === name);
}

/** The server's own origin as the client reached it (the guard has checked the Host header). */
function baseUrl(request: IncomingMessage): string {
  return `http://${request.headers.host ?? "127.0.0.1"}`;
}

/** The Agent Card: both bindings on this server, streaming, a skill per tool. */
export function agentCard(profile: A2aAgentProfile, base: string): AgentCard {
  const root = `${base}${PATH_PREFIX}${profile.name}`;
  return {
    name: profile.name,
    description: profile.description,
    supportedInterfaces: [
      {
        url: `${root}/jsonrpc`,
        protocolBinding: "JSONRPC",
        tenant: "",
        protocolVersion: A2A_PROTOCOL_VERSION,
      },
      {
        url: `${root}/rest`,
        protocolBinding: "HTTP+JSON",
        tenant: "",
        protocolVersion: A2A_PROTOCOL_VERSION,
      },
    ],
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: profile.skills.map((skill) => ({
      ...skill,
      tags: ["tool"],
      examples: [],
      inputModes: [],
      outputModes: [],
      securityRequirements: [],
    })),
    signatures: [],
  };
}

function clientGone(response: ServerResponse): AbortSignal {
  const gone = new AbortController();
  response.on("close", () => {
    if (!response.writableFinished) gone.abort();
  });
  return gone.signal;
}

function checkVersion(request: IncomingMessage): void {
  const version = request.headers[A2A_VERSION_HEADER.toLowerCase()];
  if (typeof version === "string" && version !== "" && version !== A2A_PROTOCOL_VERSION) {
    throw new VersionNotSupportedError(
      `A2A version ${version} is not supported (this server speaks ${A2A_PROTOCOL_VERSION})`,
    );
  }
}

/** The body as text, at most the contract's payload size, for `application/json` or `application/a2a+json`. */
async function readBody(request: IncomingMessage): Promise<string> {
  const type = (request.headers["content-type"] ?? "").split(";", 1)[0]?.trim().toLowerCase() ?? "";
  if (type !== "application/json" && type !== "application/a2a+json") {
    throw new RequestMalformedError("the body must be application/json or application/a2a+json");
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_PAYLOAD_BYTES)
      throw new RequestMalformedError(`the body is over ${MAX_PAYLOAD_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** `POST /a2a/<agent>/jsonrpc`: one JSON-RPC 2.0 request; streaming methods answer SSE. */
async function handleJsonRpc(
  request: RouteRequest,
  handlerFor: (request: RouteRequest) => Promise<A2aAgentHandler | undefined>,
  openStream: HttpDoorContext["openStream"],
): Promise<void> {
  const { response } = request;
  let body: unknown;
  try {
    checkVersion(request.request);
    const text = await readBody(request.request);
    try {
      body = JSON.parse(text);
    } catch {
      return sendA2aJson(response, 200, {
        jsonrpc: "2.0",
        id: null,
        error: { code: A2A_ERROR_CODE.PARSE_ERROR, message: "the body is not valid JSON" },
      });
    }
  } catch (error) {
    return sendA2aJson(response, 200, { jsonrpc: "2.0", id: null, error: toJsonRpcError(error) });
  }
  const id = idOf(body);
  const invalid = invalidEnvelope(body);
  if (invalid !== undefined) {
    return sendA2aJson(response, 200, {
      jsonrpc: "2.0",
      id,
      error: { code: A2A_ERROR_CODE.INVALID_REQUEST, message: invalid },
    });
  }
  let handler: A2aAgentHandler | undefined;
  try {
    handler = await handlerFor(request);
  } catch (error) {
    return sendA2aJson(response, 200, { jsonrpc: "2.0", id, error: toJsonRpcError(error) });
  }
  if (handler === undefined) {
    return sendA2aJson(response, 404, {
      jsonrpc: "2.0",
      id,
      error: { code: A2A_ERROR_CODE.METHOD_NOT_FOUND, message: `no agent named ${request.params[0]} here` },
    });
  }
  const method = (body as { method: string }).method;
  if (STREAMING_METHODS.has(method)) {
    // Only a streaming call holds its response open: only it counts against the stream caps.
    const refused = openStream(request.request, response);
    if (refused !== undefined) {
      return sendA2aJson(response, 503, {
        jsonrpc: "2.0",
        id,
        error: { code: A2A_ERROR_CODE.INTERNAL_ERROR, message: `overloaded: ${refused}` },
      });
    }
  }
  const result = await new JsonRpcTransportHandler(handler).handle(
    body as Record<string, unknown>,
    new ServerCallContext({ requestedVersion: A2A_PROTOCOL_VERSION }),
  );
  if (!isAsyncIterable(result)) return sendA2aJson(response, 200, result);
  const iterator = result[Symbol.asyncIterator]();
  let first: IteratorResult<unknown>;
  try {
    first = await iterator.next();
  } catch (error) {
    return sendA2aJson(response, 200, { jsonrpc: "2.0", id, error: toJsonRpcError(error) });
  }
  await streamSse(
    response,
    first,
    iterator,
    (item) => item,
    (error) => ({ jsonrpc: "2.0", id, error: toJsonRpcError(error) }),
  );
}

/** Why `body` is no JSON-RPC 2.0 request (JSON-RPC's -32600), or undefined when it is one. */
function invalidEnvelope(body: unknown): string | undefined {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    return "a JSON-RPC request is one JSON object (batches are not supported)";
  }
  const request = body as Record<string, unknown>;
  if (request.jsonrpc !== "2.0") return 'jsonrpc must be "2.0"';
  if (typeof request.method !== "string" || request.method === "") return "method must be a non-empty string";
  if ("id" in request && idOf(body) === null && request.id !== null)
    return "id must be a string, an integer or null";
  return undefined;
}

function idOf(body: unknown): string | number | null {
  if (typeof body !== "object" || body === null) return null;
  const id = (body as { id?: unknown }).id;
  return typeof id === "string" || (typeof id === "number" && Number.isInteger(id)) ? id : null;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}

/** Writes SSE from the first item on; an error mid-stream is one last error event. */
async function streamSse(
  response: ServerResponse,
  first: IteratorResult<unknown>,
  iterator: AsyncIterator<unknown>,
  toJson: (item: unknown) => unknown,
  toError: (error: unknown) => unknown,
): Promise<void> {
  response.writeHead(200, { ...SSE_HEADERS });
  response.flushHeaders();
  try {
    let next = first;
    while (!next.done) {
      response.write(formatSSEEvent(toJson(next.value)));
      next = await iterator.next();
    }
  } catch (error) {
    if (!response.writableEnded) response.write(formatSSEErrorEvent(toError(error)));
  } finally {
    await iterator.return?.(undefined).catch(() => {});
    if (!response.writableEnded) response.end();
  }
}

/** The HTTP+JSON binding under `/a2a/<agent>/rest/`. */
async function handleRest(
  request: RouteRequest,
  handlerFor: (request: RouteRequest) => Promise<A2aAgentHandler | undefined>,
): Promise<void> {
  const { response, url } = request;
  const method = request.request.method === "HEAD" ? "GET" : (request.request.method ?? "GET");
  const rest = request.params[1] ?? "";
  try {
    checkVersion(request.request);
    const handler = await handlerFor(request);
    if (handler === undefined) return sendNotFound(request);
    const task = /^tasks\/([^/:]+)(?::(cancel|subscribe))?$/.exec(rest);
    if (method === "POST" && (rest === "message:send" || rest === "message:stream")) {
      const params = SendMessageRequest.fromJSON(parseJsonObject(await readBody(request.request)));
      if (rest === "message:send") {
        const result = await handler.sendMessage(params);
        const body = "messageId" in result ? { message: result } : { task: Task.toJSON(result) };
        return sendA2aJson(response, 200, body);
      }
      return await restStream(response, handler.sendMessageStream(params));
    }
    if (method === "GET" && rest === "tasks") {
      const query = url.searchParams;
      const status = query.get("status");
      const result = await handler.listTasks({
        tenant: "",
        contextId: query.get("contextId") ?? "",
        status:
          status === null
            ? TaskState.TASK_STATE_UNSPECIFIED
            : taskStateFromJSON(Number.isNaN(Number(status)) ? status : Number(status)),
        pageSize: query.has("pageSize") ? Number(query.get("pageSize")) : undefined,
        pageToken: query.get("pageToken") ?? "",
        historyLength: query.has("historyLength")
          ? nonNegative(query.get("historyLength"), "historyLength")
          : undefined,
        statusTimestampAfter: query.get("statusTimestampAfter") ?? undefined,
        includeArtifacts: query.get("includeArtifacts") === "true",
      });
      return sendA2aJson(response, 200, ListTasksResponse.toJSON(result));
    }
    if (task !== null) {
      const id = decodeURIComponent(task[1] ?? "");
      const verb = task[2];
      if (verb === "cancel" && method === "POST") {
        return sendA2aJson(
          response,
          200,
          Task.toJSON(await handler.cancelTask({ tenant: "", id, metadata: undefined })),
        );
      }
      if (verb === "subscribe") return await restStream(response, handler.resubscribe({ tenant: "", id }));
      if (verb === undefined && method === "GET") {
        const historyLength = url.searchParams.has("historyLength")
          ? nonNegative(url.searchParams.get("historyLength"), "historyLength")
          : undefined;
        return sendA2aJson(
          response,
          200,
          Task.toJSON(await handler.getTask({ tenant: "", id, historyLength })),
        );
      }
    }
    return sendNotFound(request);
  } catch (error) {
    if (response.headersSent) {
      if (!response.writableEnded) response.end();
      return;
    }
    const status = restStatusFor(error);
    sendA2aJson(response, status, toRestErrorBody(error, status));
  }
}

async function restStream(response: ServerResponse, stream: AsyncGenerator<StreamResponse>): Promise<void> {
  const first = await stream.next();
  await streamSse(
    response,
    first,
    stream,
    (item) => StreamResponse.toJSON(item as StreamResponse),
    (error) => toRestErrorBody(error, restStatusFor(error)),
  );
}

function parseJsonObject(text: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new RequestMalformedError("the body is not valid JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new RequestMalformedError("the body must be a JSON object");
  }
  return value as Record<string, unknown>;
}

function nonNegative(value: string | null, name: string): number {
  const parsed = Number(value);
  if (!Number.isInteger(parsed) || parsed < 0)
    throw new RequestMalformedError(`${name} must be a whole number ≥ 0`);
  return parsed;
}

function sendNotFound({ response, url }: RouteRequest): void {
  sendA2aJson(response, 404, {
    error: { code: 404, status: "NOT_FOUND", message: `nothing at ${url.pathname}: no such agent or route` },
  });
}

function sendA2aJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
  });
  response.end(text);
}
