import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { sleep } from "../timers/sleep.js";

/** One request as the fake server saw it: tests assert on outgoing bodies with these. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON body (undefined when empty or not JSON). */
  body: unknown;
  rawBody: string;
  /** True once the connection closed before the response was complete (the client aborted, or a cut). */
  isClosedEarly: boolean;
}

/** What a {@link FakeRoute} answers. */
export type FakeResponse =
  /** A JSON body with a status (default 200) and headers. */
  | { type: "json"; status?: number; headers?: Record<string, string>; body: unknown }
  /**
   * A `text/event-stream` response written frame by frame. Each item is a complete SSE frame
   * text (e.g. `event: x\ndata: {...}\n\n`). `cutAfter`: destroy the socket after that many frames
   * (a connection cut mid-stream). `stallAfter`: after that many frames, write nothing more and
   * keep the connection open until the client goes away (a stream stalled mid-way). `delayMs`:
   * pause between frames. `pauseAfter`: after that many frames, wait for `until` before writing the
   * rest (a model that stalls mid-answer).
   */
  | {
      type: "sse";
      /** Default 200 (a recorded stream may have another). */
      status?: number;
      frames: string[];
      headers?: Record<string, string>;
      cutAfter?: number;
      stallAfter?: number;
      delayMs?: number;
      pauseAfter?: { frames: number; until: Promise<unknown> };
    }
  /** Accept the request and never answer (for timeout tests). */
  | { type: "hang" }
  /** Destroy the connection without a response. */
  | { type: "reset" };

/** Answers one request; `index` is its 0-based position among all requests the server got. */
export type FakeRoute = (request: RecordedRequest, index: number) => FakeResponse | Promise<FakeResponse>;

/** A running fake server. */
export interface FakeHttpServer {
  /** e.g. `http://127.0.0.1:PORT` */
  url: string;
  /** Every request received, in order. */
  requests: RecordedRequest[];
  /** Stops the server, cutting open connections (stalled streams included). */
  close(): Promise<void>;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

/** Resolves when the client has gone (or the server destroyed the connection on close). */
function untilClosed(response: ServerResponse): Promise<void> {
  if (response.destroyed || response.socket === null || response.socket.destroyed) return Promise.resolve();
  return new Promise((resolve) => response.once("close", () => resolve()));
}

async function write(response: ServerResponse, reply: FakeResponse): Promise<void> {
  if (reply.type === "json") {
    response.writeHead(reply.status ?? 200, { "content-type": "application/json", ...reply.headers });
    response.end(JSON.stringify(reply.body));
    return;
  }
  if (reply.type === "hang") return;
  if (reply.type === "reset") {
    response.socket?.destroy();
    return;
  }
  response.writeHead(reply.status ?? 200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    connection: "keep-alive",
    ...reply.headers,
  });
  for (let i = 0; i < reply.frames.length; i++) {
    // The client went away (an abort): stop writing to a closed connection.
    if (response.destroyed || response.writableEnded) return;
    if (reply.stallAfter !== undefined && i >= reply.stallAfter) {
      await untilClosed(response);
      return;
    }
    if (reply.pauseAfter !== undefined && i === reply.pauseAfter.frames) await reply.pauseAfter.until;
    if (reply.cutAfter !== undefined && i >= reply.cutAfter) {
      // Let the frames already written reach the client, then cut before a clean end.
      await sleep(10);
      response.socket?.destroy();
      return;
    }
    response.write(reply.frames[i]);
    if (reply.delayMs) await sleep(reply.delayMs);
  }
  if (reply.stallAfter !== undefined) {
    await untilClosed(response);
    return;
  }
  if (reply.cutAfter !== undefined && reply.cutAfter <= reply.frames.length) {
    // Let the frames reach the client, then cut before a clean end.
    await sleep(10);
    response.socket?.destroy();
    return;
  }
  response.end();
}

/**
 * A local HTTP server for wire tests: every request is recorded and answered by `route`, which
 * gets the request and its 0-based index (so a test can script "429 first, then success").
 */
export async function startFakeHttpServer(route: FakeRoute): Promise<FakeHttpServer> {
  const requests: RecordedRequest[] = [];
  const sockets = new Set<import("node:net").Socket>();
  const server: Server = createServer(async (incoming, response) => {
    const rawBody = await readBody(incoming);
    let body: unknown;
    try {
      body = rawBody ? JSON.parse(rawBody) : undefined;
    } catch {
      body = undefined;
    }
    const recorded: RecordedRequest = {
      method: incoming.method ?? "GET",
      path: incoming.url ?? "/",
      headers: incoming.headers,
      body,
      rawBody,
      isClosedEarly: false,
    };
    response.once("close", () => {
      if (!response.writableFinished) recorded.isClosedEarly = true;
    });
    requests.push(recorded);
    try {
      await write(response, await route(recorded, requests.length - 1));
    } catch (error) {
      response.writeHead(500, { "content-type": "application/json" });
      response.end(JSON.stringify({ error: { message: String(error) } }));
    }
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
