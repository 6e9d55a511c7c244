import type { ServerResponse } from "node:http";

/** A connected `/api/events` client and the events it asked for. */
interface SseClient {
  response: ServerResponse;
  accepts: (agent: string, session: string) => boolean;
}

export interface SseHubOptions {
  /** Interval of the keep-alive comment (proxies drop idle streams). */
  keepAliveMs?: number;
  /** A client whose unsent output passes this many bytes is disconnected (it can reconnect). */
  maxBufferedBytes?: number;
}

/**
 * Fans events out to Server-Sent-Events clients: one `data:` message per event, a comment every
 * `keepAliveMs`. A client that stops reading is dropped rather than buffered without bound.
 */
export class SseHub {
  private readonly clients = new Set<SseClient>();
  private readonly timer: NodeJS.Timeout;
  private readonly maxBufferedBytes: number;

  constructor(options: SseHubOptions = {}) {
    this.maxBufferedBytes = options.maxBufferedBytes ?? 8 * 1024 * 1024;
    this.timer = setInterval(() => this.writeAll(": keep-alive\n\n"), options.keepAliveMs ?? 15_000);
    this.timer.unref();
  }

  get size(): number {
    return this.clients.size;
  }

  /** Starts the event stream on `response`; it ends when the client goes away or the hub closes. */
  add(response: ServerResponse, accepts: SseClient["accepts"]): void {
    response.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    response.write("retry: 2000\n: connected\n\n");
    const client: SseClient = { response, accepts };
    this.clients.add(client);
    response.on("close", () => this.clients.delete(client));
  }

  /** Sends `json` (one line of JSON) to every client that wants this session's events. */
  broadcast(agent: string, session: string, json: string): void {
    const message = `data: ${json}\n\n`;
    for (const client of this.clients) {
      if (client.accepts(agent, session)) this.write(client, message);
    }
  }

  /** Ends every stream. */
  close(): void {
    clearInterval(this.timer);
    for (const client of this.clients) client.response.end();
    this.clients.clear();
  }

  private writeAll(text: string): void {
    for (const client of this.clients) this.write(client, text);
  }

  private write(client: SseClient, text: string): void {
    if (client.response.writableLength > this.maxBufferedBytes) {
      this.clients.delete(client);
      client.response.destroy();
      return;
    }
    client.response.write(text);
  }
}
