import type { IncomingMessage, ServerResponse } from "node:http";
import { parseRequestUrl } from "./http-guard.js";
import { HttpError } from "./http-io.js";

/** One request as a route handler sees it: the path's captured parts are in `params`. */
export interface RouteRequest {
  request: IncomingMessage;
  response: ServerResponse;
  url: URL;
  /** The groups the route's pattern captured (raw, not yet decoded). */
  params: readonly string[];
}

/** A row of the routing table: a method and a path (exact, or a pattern whose groups are params). */
export interface Route {
  /** GET routes answer HEAD too. */
  method: "GET" | "POST" | "DELETE";
  path: string | RegExp;
  handle(request: RouteRequest): Promise<void> | void;
}

/**
 * The request handler of a routing table: the first route whose path and method match handles the
 * request; a path some route has, asked with another method, is a 405 naming the method it takes;
 * any other request goes to `fallback` (e.g. the static files).
 */
export function createRouter(
  routes: readonly Route[],
  fallback: (request: RouteRequest) => Promise<void> | void,
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  return async (request, response) => {
    const url = parseRequestUrl(request);
    if (url === undefined) throw new HttpError(400, "bad_request", "the request URL is malformed");
    const method = request.method ?? "GET";
    const allowed: string[] = [];
    for (const route of routes) {
      const params = matchPath(route.path, url.pathname);
      if (params === undefined) continue;
      if (route.method === method || (route.method === "GET" && method === "HEAD")) {
        return route.handle({ request, response, url, params });
      }
      allowed.push(route.method);
    }
    if (allowed.length > 0) {
      throw new HttpError(405, "method_not_allowed", `${url.pathname} takes ${allowed.join(" or ")}`);
    }
    return fallback({ request, response, url, params: [] });
  };
}

/** The captured groups when `path` matches (none for an exact path), else undefined. */
function matchPath(pattern: string | RegExp, path: string): string[] | undefined {
  if (typeof pattern === "string") return pattern === path ? [] : undefined;
  const match = pattern.exec(path);
  return match === null ? undefined : match.slice(1).map((group) => group ?? "");
}
