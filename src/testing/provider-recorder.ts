import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { describeError } from "../errors/describe-error.js";
import { type FakeHttpServer, type FakeResponse, startFakeHttpServer } from "./fake-http-server.js";

/**
 * A fixture is JSON Lines, one record per line, exchanges in the order they happened:
 * a `request` (method, path, JSON body — never headers, which carry the API key), the
 * `response` status and content headers, then either one `event` line per SSE event or one
 * `body` line. Editing a fixture by hand (dropping an event, changing a delta) stays a one-line
 * change.
 */
export type FixtureRecord =
  | { type: "request"; method: string; path: string; body: unknown }
  | { type: "response"; status: number; headers: Record<string, string> }
  /** One SSE event: its `event:` name when it had one, its data lines joined with "\n". */
  | { type: "event"; event?: string; data: string }
  /** A non-streamed body: parsed JSON when it parses, else the text. */
  | { type: "body"; body: unknown }
  /** The answer broke off (the upstream cut the connection): a replay cuts it there too. */
  | { type: "cut" };

/** One recorded request and its answer. */
export interface FixtureExchange {
  request: { method: string; path: string; body: unknown };
  response: { status: number; headers: Record<string, string> };
  /** The SSE events, for a streamed answer. */
  events?: Array<{ event?: string; data: string }>;
  /** The body, for an answer that was not streamed. */
  body?: unknown;
  /** True when the answer broke off before it ended. */
  isCut?: boolean;
}

/** Response headers worth replaying: the content type and what clients read off errors. */
const KEPT_HEADERS = ["content-type", "retry-after", "retry-after-ms", "request-id", "x-request-id"];
/** Request headers not forwarded: hop-by-hop ones, and encodings the recorder could not read. */
const DROPPED_REQUEST_HEADERS = new Set([
  "host",
  "connection",
  "content-length",
  "accept-encoding",
  "keep-alive",
]);

/** Options of {@link recordProvider}. */
export interface RecordProviderOptions {
  /** The real provider's base URL, e.g. `https://api.anthropic.com` or `https://api.openai.com/v1`. */
  upstream: string;
  /** Where the fixture is written (replaced if it exists), one exchange appended as each one ends. */
  fixturePath: string;
  /** Injected for tests; default the global `fetch`. */
  fetch?: typeof fetch;
}

/** A running recorder: point the SDK at `url` where it would use the upstream base URL. */
export interface ProviderRecorder {
  /** Stands in for `upstream`: a request to `url + path` is forwarded to `upstream + path`. */
  url: string;
  /** The exchanges recorded so far. */
  exchanges: FixtureExchange[];
  close(): Promise<void>;
}

/**
 * Starts an HTTP proxy that forwards every request to a real provider and writes the exchange to
 * a fixture ({@link FixtureRecord}) while streaming the answer back unchanged, so a live session
 * through the real SDK becomes a transcript {@link replayFixture} serves later.
 */
export async function recordProvider(options: RecordProviderOptions): Promise<ProviderRecorder> {
  const upstream = new URL(options.upstream);
  const upstreamPath = upstream.pathname.replace(/\/$/, "");
  const fetchUpstream = options.fetch ?? fetch;
  writeFileSync(options.fixturePath, "");
  const exchanges: FixtureExchange[] = [];
  const sockets = new Set<Socket>();

  const forward = async (incoming: IncomingMessage, outgoing: ServerResponse) => {
    const rawBody = await readBody(incoming);
    const path = incoming.url ?? "/";
    const method = incoming.method ?? "GET";
    const exchange: FixtureExchange = {
      request: { method, path, body: parseJson(rawBody) },
      response: { status: 0, headers: {} },
    };
    const headers = new Headers();
    for (const [name, value] of Object.entries(incoming.headers)) {
      if (value === undefined || DROPPED_REQUEST_HEADERS.has(name)) continue;
      headers.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    const abort = new AbortController();
    outgoing.once("close", () => {
      if (!outgoing.writableFinished) abort.abort();
    });
    const target = new URL(upstreamPath + path, upstream.origin);
    const answer = await fetchUpstream(target, {
      method,
      headers,
      ...(rawBody !== "" && method !== "GET" && method !== "HEAD" ? { body: rawBody } : {}),
      signal: abort.signal,
    });
    exchange.response.status = answer.status;
    for (const name of KEPT_HEADERS) {
      const value = answer.headers.get(name);
      if (value !== null) exchange.response.headers[name] = value;
    }
    outgoing.writeHead(answer.status, exchange.response.headers);
    const isStream = (answer.headers.get("content-type") ?? "").includes("text/event-stream");
    const decoder = new TextDecoder();
    const parser = isStream ? createSseParser() : undefined;
    let text = "";
    try {
      const reader = answer.body?.getReader();
      for (let read = await reader?.read(); read && !read.done; read = await reader?.read()) {
        outgoing.write(read.value);
        const decoded = decoder.decode(read.value, { stream: true });
        if (parser) parser.push(decoded);
        else text += decoded;
      }
    } catch (error) {
      exchange.isCut = true;
      throw error;
    } finally {
      // A cut upstream (or a client that went away) still leaves what arrived in the fixture.
      if (parser) exchange.events = parser.end();
      else exchange.body = parseJson(text) ?? text;
      exchanges.push(exchange);
      appendFileSync(
        options.fixturePath,
        toRecords(exchange)
          .map((r) => `${JSON.stringify(r)}\n`)
          .join(""),
      );
    }
    outgoing.end();
  };

  const server = createServer((incoming, outgoing) => {
    forward(incoming, outgoing).catch((error: unknown) => {
      if (outgoing.headersSent) {
        outgoing.socket?.destroy();
        return;
      }
      outgoing.writeHead(502, { "content-type": "application/json" });
      const message = `recordProvider: the upstream failed: ${describeError(error)}`;
      outgoing.end(JSON.stringify({ error: { type: "proxy_error", message } }));
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exchanges,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Reads a fixture written by {@link recordProvider} into its exchanges. */
export function readFixture(fixturePath: string): FixtureExchange[] {
  const exchanges: FixtureExchange[] = [];
  const lines = readFileSync(fixturePath, "utf8").split("\n");
  lines.forEach((line, position) => {
    if (line.trim() === "") return;
    const where = `${fixturePath}:${position + 1}`;
    let record: FixtureRecord;
    try {
      record = JSON.parse(line) as FixtureRecord;
    } catch {
      throw new SyntaxError(`${where}: not a JSON line`);
    }
    const current = exchanges.at(-1);
    if (record.type === "request") {
      exchanges.push({
        request: { method: record.method, path: record.path, body: record.body },
        response: { status: 0, headers: {} },
      });
    } else if (current === undefined) {
      throw new SyntaxError(`${where}: a "${record.type}" record before any request`);
    } else if (record.type === "response") {
      current.response = { status: record.status, headers: record.headers };
    } else if (record.type === "event") {
      current.events ??= [];
      current.events.push(
        record.event === undefined ? { data: record.data } : { event: record.event, data: record.data },
      );
    } else if (record.type === "body") {
      current.body = record.body;
    } else if (record.type === "cut") {
      current.isCut = true;
    } else {
      throw new SyntaxError(`${where}: unknown record type "${String((record as { type?: unknown }).type)}"`);
    }
  });
  return exchanges;
}

/** A replaying server: {@link FakeHttpServer} plus the exchanges it serves. */
export interface FixtureReplay extends FakeHttpServer {
  exchanges: FixtureExchange[];
}

/**
 * Serves a recorded fixture back: request N gets exchange N's answer (status, content headers,
 * the SSE events as frames or the body). A request past the end, or to another method or path
 * than the one recorded, gets a 500 that says so, so a test drifting from its fixture fails loudly.
 */
export async function replayFixture(fixturePath: string): Promise<FixtureReplay> {
  const exchanges = readFixture(fixturePath);
  const server = await startFakeHttpServer((request, index): FakeResponse => {
    const exchange = exchanges[index];
    const mismatch =
      exchange === undefined
        ? `the fixture has ${exchanges.length} exchange(s)`
        : exchange.request.method !== request.method || exchange.request.path !== request.path
          ? `the fixture recorded ${exchange.request.method} ${exchange.request.path}`
          : undefined;
    if (exchange === undefined || mismatch !== undefined) {
      const message = `replayFixture: request ${index + 1} is ${request.method} ${request.path}, but ${mismatch}`;
      return { type: "json", status: 500, body: { error: { type: "replay_mismatch", message } } };
    }
    const { status, headers } = exchange.response;
    if (exchange.events !== undefined) {
      const frames = exchange.events.map(
        ({ event, data }) =>
          `${event !== undefined ? `event: ${event}\n` : ""}${data
            .split("\n")
            .map((line) => `data: ${line}`)
            .join("\n")}\n\n`,
      );
      return { type: "sse", status, frames, headers, ...(exchange.isCut ? { cutAfter: frames.length } : {}) };
    }
    return { type: "json", status, headers, body: exchange.body };
  });
  return { ...server, exchanges };
}

function toRecords(exchange: FixtureExchange): FixtureRecord[] {
  return [
    { type: "request", ...exchange.request },
    { type: "response", ...exchange.response },
    ...(exchange.events ?? []).map((event): FixtureRecord => ({ type: "event", ...event })),
    ...(exchange.events === undefined ? [{ type: "body", body: exchange.body } as FixtureRecord] : []),
    ...(exchange.isCut ? [{ type: "cut" } as FixtureRecord] : []),
  ];
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

function parseJson(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** An incremental SSE parser: complete events out, comments (`: ping`) and `retry:` dropped. */
function createSseParser() {
  const events: Array<{ event?: string; data: string }> = [];
  let buffer = "";
  const flushBlock = (block: string) => {
    let event: string | undefined;
    const data: string[] = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":") || line === "") continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (data.length > 0)
      events.push(event === undefined ? { data: data.join("\n") } : { event, data: data.join("\n") });
  };
  return {
    push(text: string) {
      // A "\r" ending a chunk may start a "\r\n" the next chunk finishes: it waits for it.
      buffer = (buffer + text).replace(/\r\n/g, "\n").replace(/\r(?!$)/g, "\n");
      let end = buffer.indexOf("\n\n");
      while (end >= 0) {
        flushBlock(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
        end = buffer.indexOf("\n\n");
      }
    },
    /** The events so far; an unterminated last event (a cut stream) is not an event. */
    end: () => events,
  };
}
