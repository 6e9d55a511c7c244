import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { ConfigurationError } from "../errors/configuration-error.js";

/**
 * The one gate every HTTP server of ours puts in front of its handler (the web UI of `ui` and
 * `up` today; any later HTTP door wraps its handler the same way):
 *
 * 1. **Host** must name this server: a loopback name (`localhost`, `127.x.x.x`, `[::1]`) or one of
 *    this machine's own IP addresses, with the port the request arrived on, or a name the operator
 *    allowed. A web page that rebinds its own name to 127.0.0.1 still sends its own name as Host,
 *    so it is refused (403 `forbidden`).
 * 2. **Origin**, when the browser sends one, must pass the same rule; `null` (sandboxed frames,
 *    `file:` pages) never does (403 `forbidden`).
 * 3. **Token**: required when the server listens on anything but loopback, or when one is given.
 *    Sent as `Authorization: Bearer <token>`; stream routes (which `EventSource` opens, and which
 *    cannot set headers) also take it as a `token` query parameter. Compared in constant time.
 *    Missing or wrong: 401 `unauthorized`. Public paths (the page's own files) need none.
 * 4. **Streams**: long-lived responses are capped globally and per remote address (503
 *    `overloaded`), so one client cannot hold every socket.
 *
 * Every response, refusals included, carries the security headers ({@link SECURITY_HEADERS}).
 * Every refusal is counted by rule ({@link HttpGuard.stats}) and logged (a few a minute, so a
 * flood cannot fill the log).
 *
 * @example
 * const guard = createHttpGuard({ listenHost: "127.0.0.1", isPublicPath: (p) => !p.startsWith("/api/") });
 * const server = createServer(guard.wrap((request, response) => route(request, response)));
 */
export interface HttpGuard {
  /** `handler` behind the checks: it runs only for requests that pass them. */
  wrap(handler: RequestListener): RequestListener;
  /** The token requests must carry, or undefined when none is required (loopback, none given). */
  readonly token: string | undefined;
  /**
   * Counts `response` as an open stream (until it closes) when the handler learns only from the
   * body that it will stream (a JSON-RPC streaming method): undefined when taken, else why not (the
   * refusal is counted and logged; the handler answers it in its protocol's own shape).
   */
  openStream(request: IncomingMessage, response: ServerResponse): string | undefined;
  /** Refusals so far by rule, and the streams open now. */
  stats(): HttpGuardStats;
}

/** Why a request was refused: the rule it broke. */
export type HttpGuardRule = "host" | "origin" | "token" | "streams";

export interface HttpGuardStats {
  refused: Record<HttpGuardRule, number>;
  openStreams: number;
}

export interface HttpGuardOptions {
  /** The address the server listens on: anything but loopback requires a token. */
  listenHost: string;
  /**
   * Host names (or `name:port`) accepted besides loopback and this machine's addresses, e.g. the
   * name of a reverse proxy. A name without a port matches on any port.
   */
  allowedHosts?: readonly string[];
  /** The token to require; when undefined and a token is required, a random one is made. */
  token?: string;
  /** Paths served without a token (the page's static files). Default: none. */
  isPublicPath?: (path: string) => boolean;
  /** Paths that hold the response open (Server-Sent Events): capped, and take `?token=`. */
  isStreamPath?: (path: string) => boolean;
  /** Streams open at once, all clients together (default 256). */
  maxStreams?: number;
  /** Streams open at once from one remote address (default 32, at most `maxStreams`). */
  maxStreamsPerAddress?: number;
  /** Where refusals are reported, one line each. Default: nowhere. */
  log?: (line: string) => void;
  /** This machine's addresses (default: `os.networkInterfaces()`), for Host checks when bound wide. */
  localAddresses?: () => string[];
  /** Clock for the log's rate limit (default `Date.now`). */
  now?: () => number;
}

/** Headers on every response: no framing, no sniffing, no referrer, only our own scripts. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-resource-policy": "same-origin",
};

export const DEFAULT_MAX_STREAMS = 256;
export const DEFAULT_MAX_STREAMS_PER_ADDRESS = 32;
/** Refusals logged per minute; the rest are only counted. */
const LOGGED_REFUSALS_PER_MINUTE = 20;

/** Whether `host` (an address to listen on) is loopback only: no token needed there by default. */
export function isLoopbackListenHost(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, "").toLowerCase();
  return bare === "localhost" || bare === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(bare);
}

/** A fresh random token (24 bytes, base64url): what `ui` prints in its URL when none is given. */
export function generateToken(): string {
  return randomBytes(24).toString("base64url");
}

/** See {@link HttpGuard}. */
export function createHttpGuard(options: HttpGuardOptions): HttpGuard {
  const isTokenRequired = options.token !== undefined || !isLoopbackListenHost(options.listenHost);
  const token = isTokenRequired ? (options.token ?? generateToken()) : undefined;
  const tokenDigest = token === undefined ? undefined : digest(token);
  const allowed = (options.allowedHosts ?? []).map(parseAllowedHost);
  const isPublicPath = options.isPublicPath ?? (() => false);
  const isStreamPath = options.isStreamPath ?? (() => false);
  const maxStreams = options.maxStreams ?? DEFAULT_MAX_STREAMS;
  const maxPerAddress = Math.min(options.maxStreamsPerAddress ?? DEFAULT_MAX_STREAMS_PER_ADDRESS, maxStreams);
  const localAddresses = options.localAddresses ?? listLocalAddresses;
  const log = options.log ?? (() => undefined);
  const now = options.now ?? Date.now;
  const refused: Record<HttpGuardRule, number> = { host: 0, origin: 0, token: 0, streams: 0 };
  const streamsByAddress = new Map<string, number>();
  let openStreams = 0;
  let logWindow = { start: Number.NEGATIVE_INFINITY, logged: 0, skipped: 0 };

  /** Host values this server answers to: `hostPort` is `name[:port]` as a Host header has it. */
  const isAllowedHostPort = (hostPort: string, localPort: number | undefined): boolean => {
    const parsed = parseHostPort(hostPort);
    if (parsed === undefined) return false;
    const { name, port } = parsed;
    for (const entry of allowed) {
      if (entry.name === name && (entry.port === undefined || entry.port === port)) return true;
    }
    if (port !== localPort) return false;
    if (isLoopbackListenHost(name)) return true;
    const bare = name.replace(/^\[|\]$/g, "");
    // An IP literal reaches this server only if the browser connected to that address; the
    // machine's own addresses are what `ui --host 0.0.0.0` prints.
    return isIP(bare) !== 0 && localAddresses().includes(bare);
  };

  const countRefusal = (request: IncomingMessage, rule: HttpGuardRule, message: string): void => {
    refused[rule] += 1;
    report(
      `refused ${request.method ?? "GET"} ${pathOf(request)} from ${remoteOf(request)} (rule: ${rule}): ${message}`,
    );
  };

  const refuse = (
    request: IncomingMessage,
    response: ServerResponse,
    rule: HttpGuardRule,
    status: number,
    code: string,
    message: string,
  ): void => {
    countRefusal(request, rule, message);
    const body = JSON.stringify({ ok: false, error: { code, message } });
    response.writeHead(status, {
      "content-type": "application/json; charset=utf-8",
      "content-length": Buffer.byteLength(body),
      "cache-control": "no-store",
      ...(rule === "token" ? { "www-authenticate": 'Bearer realm="agentloop"' } : {}),
    });
    response.end(body);
  };

  const report = (line: string): void => {
    const time = now();
    if (time - logWindow.start >= 60_000) {
      if (logWindow.skipped > 0)
        log(`${logWindow.skipped} more refusal(s) in the last minute were counted, not logged`);
      logWindow = { start: time, logged: 0, skipped: 0 };
    }
    if (logWindow.logged < LOGGED_REFUSALS_PER_MINUTE) {
      logWindow.logged += 1;
      log(line);
    } else logWindow.skipped += 1;
  };

  const hasValidToken = (request: IncomingMessage, url: URL, isStream: boolean): boolean => {
    if (tokenDigest === undefined) return true;
    const header = request.headers.authorization;
    const bearer = typeof header === "string" ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined;
    const offered = bearer ?? (isStream ? url.searchParams.get("token") : null) ?? undefined;
    return offered !== undefined && timingSafeEqual(digest(offered), tokenDigest);
  };

  /** Counts `response` as an open stream until it closes; over a cap, why not (nothing counted). */
  const claimStream = (request: IncomingMessage, response: ServerResponse): string | undefined => {
    const address = remoteOf(request);
    const fromAddress = streamsByAddress.get(address) ?? 0;
    if (openStreams >= maxStreams || fromAddress >= maxPerAddress) {
      const which = openStreams >= maxStreams ? `${maxStreams} in all` : `${maxPerAddress} per address`;
      return `too many open event streams (at most ${which})`;
    }
    openStreams += 1;
    streamsByAddress.set(address, fromAddress + 1);
    response.once("close", () => {
      openStreams -= 1;
      const left = (streamsByAddress.get(address) ?? 1) - 1;
      if (left <= 0) streamsByAddress.delete(address);
      else streamsByAddress.set(address, left);
    });
    return undefined;
  };

  const wrap = (handler: RequestListener): RequestListener => {
    return (request, response) => {
      for (const [name, value] of Object.entries(SECURITY_HEADERS)) response.setHeader(name, value);
      const localPort = request.socket.localPort;
      const host = request.headers.host;
      if (host === undefined || host === "") {
        refuse(request, response, "host", 403, "forbidden", "the request has no Host header");
        return;
      }
      if (!isAllowedHostPort(host, localPort)) {
        refuse(
          request,
          response,
          "host",
          403,
          "forbidden",
          `Host "${truncate(host)}" is not this server (loopback, this machine's addresses, or --ui-allowed-hosts)`,
        );
        return;
      }
      const origin = request.headers.origin;
      if (
        origin !== undefined &&
        !isAllowedOrigin(origin, (hostPort) => isAllowedHostPort(hostPort, localPort))
      ) {
        refuse(
          request,
          response,
          "origin",
          403,
          "forbidden",
          `Origin "${truncate(origin)}" is not this server's (pages of other sites may not call it)`,
        );
        return;
      }
      const url = parseRequestUrl(request);
      if (url === undefined) {
        // Not a refusal by a rule: the request line itself is broken (`GET //[x`).
        const body = JSON.stringify({
          ok: false,
          error: { code: "bad_request", message: "the request URL is malformed" },
        });
        response.writeHead(400, {
          "content-type": "application/json; charset=utf-8",
          "cache-control": "no-store",
        });
        response.end(body);
        return;
      }
      const isStream = isStreamPath(url.pathname);
      if (!isPublicPath(url.pathname) && !hasValidToken(request, url, isStream)) {
        refuse(
          request,
          response,
          "token",
          401,
          "unauthorized",
          "a valid token is required (Authorization: Bearer <token>; open the URL agentloop printed)",
        );
        return;
      }
      if (isStream) {
        const over = claimStream(request, response);
        if (over !== undefined) {
          refuse(request, response, "streams", 503, "overloaded", over);
          return;
        }
      }
      handler(request, response);
    };
  };

  return {
    wrap,
    token,
    openStream: (request, response) => {
      const over = claimStream(request, response);
      if (over === undefined) return undefined;
      countRefusal(request, "streams", over);
      return over;
    },
    stats: () => ({ refused: { ...refused }, openStreams }),
  };
}

/** The request's URL (its path and query; the host part is ours), or undefined when malformed. */
export function parseRequestUrl(request: IncomingMessage): URL | undefined {
  try {
    return new URL(request.url ?? "/", "http://localhost");
  } catch {
    return undefined;
  }
}

/** `Origin: scheme://host[:port]` whose host:port passes `isAllowedHostPort`; `null` never does. */
function isAllowedOrigin(origin: string, isAllowedHostPort: (hostPort: string) => boolean): boolean {
  const match = /^(https?):\/\/([^/?#@\s]+)$/i.exec(origin.trim());
  if (match === null) return false;
  const scheme = match[1]!.toLowerCase();
  const hostPort = match[2]!;
  // The default port is implied: `http://localhost` is port 80.
  const hasPort = /:\d+$/.test(hostPort) && !hostPort.endsWith("]");
  return isAllowedHostPort(hasPort ? hostPort : `${hostPort}:${scheme === "https" ? 443 : 80}`);
}

interface HostPort {
  /** Lower case; IPv6 in brackets. */
  name: string;
  port: number;
}

/** `name[:port]` as a Host header carries it (no port means 80), or undefined when malformed. */
function parseHostPort(value: string): HostPort | undefined {
  const match = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/.exec(value.trim());
  if (match === null) return undefined;
  const port = match[2] === undefined ? 80 : Number(match[2]);
  if (port > 65_535) return undefined;
  return { name: match[1]!.toLowerCase(), port };
}

/** An `--ui-allowed-hosts` entry: `name` (any port) or `name:port`. */
function parseAllowedHost(entry: string): { name: string; port?: number } {
  const parsed = parseHostPort(entry);
  if (parsed === undefined) throw new ConfigurationError(`not a host name: "${entry}"`);
  return /:\d+$/.test(entry.trim()) && !entry.trim().endsWith("]") ? parsed : { name: parsed.name };
}

/** Whether `entry` is a usable `--ui-allowed-hosts` entry (`name` or `name:port`). */
export function isValidAllowedHost(entry: string): boolean {
  return parseHostPort(entry) !== undefined;
}

/** This machine's IP addresses (every interface, loopback included). */
export function listLocalAddresses(): string[] {
  const addresses: string[] = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) addresses.push(info.address);
  }
  return addresses;
}

function digest(text: string): Buffer {
  // Hashing first makes the comparison constant-time whatever the offered token's length.
  return createHash("sha256").update(text, "utf8").digest();
}

function pathOf(request: IncomingMessage): string {
  // The path without its query: a token in `?token=` must not reach the log.
  return truncate((request.url ?? "/").split("?")[0] ?? "/");
}

function remoteOf(request: IncomingMessage): string {
  return request.socket.remoteAddress ?? "unknown";
}

function truncate(text: string): string {
  const printable = text.replace(/[^\x20-\x7e]/g, "?");
  return printable.length > 100 ? `${printable.slice(0, 100)}…` : printable;
}
