import type { ServerResponse } from "node:http";
import type { Event as AguiEvent } from "@ag-ui/core";

/** A client whose unsent output passes this many bytes is cut off (it can reconnect with its last id). */
const MAX_BUFFERED_BYTES = 8 * 1024 * 1024;

/**
 * One run's Server-Sent-Events answer: headers when the run is known to go ahead, then one
 * `id:`/`data:` message per AG-UI event, and a comment every `keepAliveMs` so that proxies keep a
 * quiet stream (a run waiting behind another chat of its thread) open.
 */
export class AguiSse {
  readonly #response: ServerResponse;
  readonly #keepAliveMs: number;
  #timer: NodeJS.Timeout | undefined;

  constructor(response: ServerResponse, keepAliveMs: number) {
    this.#response = response;
    this.#keepAliveMs = keepAliveMs;
  }

  /** Whether the headers went out (after that, every answer is an event of the stream). */
  get isOpen(): boolean {
    return this.#response.headersSent;
  }

  /** Sends the headers (once). */
  open(): void {
    if (this.#response.headersSent || this.#response.destroyed) return;
    this.#response.writeHead(200, {
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache, no-transform",
      connection: "keep-alive",
      "x-accel-buffering": "no",
    });
    this.#response.write(": agentloop AG-UI run\n\n");
    this.#timer = setInterval(() => this.#write(": keep-alive\n\n"), this.#keepAliveMs);
    this.#timer.unref();
  }

  /** One event; `id` is what a reconnect sends back as Last-Event-ID (framing events carry none). */
  send(event: AguiEvent, id?: string): void {
    this.open();
    // Compact JSON never holds a newline, so one `data:` line carries it.
    this.#write(`${id === undefined ? "" : `id: ${id}\n`}data: ${JSON.stringify(event)}\n\n`);
  }

  /** Ends the stream. */
  end(): void {
    clearInterval(this.#timer);
    if (!this.#response.writableEnded) this.#response.end();
  }

  #write(text: string): void {
    if (this.#response.writableEnded || this.#response.destroyed) return;
    if (this.#response.writableLength > MAX_BUFFERED_BYTES) {
      clearInterval(this.#timer);
      this.#response.destroy();
      return;
    }
    this.#response.write(text);
  }
}
