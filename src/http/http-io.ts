import type { IncomingMessage, ServerResponse } from "node:http";
import { AgentloopError } from "../errors/agentloop-error.js";

/** Small request/response helpers for the UI server (node:http, no framework). */

/** The `error.code` of a refused web request's JSON body; web clients switch on these strings. */
export type HttpErrorCode = "bad_request" | "not_found" | "method_not_allowed";

/**
 * A request the client got wrong: answered with `status` and
 * `{ ok: false, error: { code: responseCode, message } }`. Its own `code` is the hierarchy's
 * `http_request` for every such refusal; the response's code is kept apart because the web
 * answers' `not_found` is not the model's `not_found` of the same name.
 *
 * @example
 * ```ts
 * throw new HttpError(405, "method_not_allowed", "/api/chat takes POST");
 * ```
 */
export class HttpError extends AgentloopError {
  readonly code = "http_request";
  readonly retryable = false;
  declare readonly status: number;
  /** The `error.code` the JSON response carries. */
  readonly responseCode: HttpErrorCode;

  constructor(status: number, responseCode: HttpErrorCode, message: string) {
    super(message, { status });
    this.responseCode = responseCode;
  }
}

/** Writes `body` as JSON with `status`. */
export function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
  });
  response.end(text);
}

/** Writes a JSON error reply: `{ ok: false, error: { code, message } }`. */
export function sendError(response: ServerResponse, status: number, code: string, message: string): void {
  sendJson(response, status, { ok: false, error: { code, message } });
}

/**
 * Reads a JSON request body of at most `limitBytes`. Requiring `application/json` also keeps
 * other web pages out: a cross-site form cannot send that content type without a CORS preflight,
 * which this server never grants.
 */
export async function readJsonBody(request: IncomingMessage, limitBytes: number): Promise<unknown> {
  const type = request.headers["content-type"] ?? "";
  if (!/^application\/json\b/i.test(type)) {
    throw new HttpError(415, "bad_request", "the body must be JSON (content-type: application/json)");
  }
  const declared = Number(request.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limitBytes) {
    throw new HttpError(413, "bad_request", `the body is too large (max ${limitBytes} bytes)`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > limitBytes)
      throw new HttpError(413, "bad_request", `the body is too large (max ${limitBytes} bytes)`);
    chunks.push(buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, "bad_request", "the body is not valid JSON");
  }
}
