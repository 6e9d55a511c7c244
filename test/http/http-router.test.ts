import type { IncomingMessage, ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { HttpError } from "../../src/http/http-io.js";
import { createRouter, type Route } from "../../src/http/http-router.js";

/** The UI server's routing table (routes as a table instead of an if-chain). */

function routerRecording() {
  const calls: string[] = [];
  const routes: Route[] = [
    { method: "POST", path: "/api/chat", handle: () => void calls.push("chat") },
    { method: "GET", path: "/api/info", handle: () => void calls.push("info") },
    {
      method: "GET",
      path: /^\/api\/sessions\/([^/]+)\/([^/]+)\/events$/,
      handle: ({ params }) => void calls.push(`events ${params.join(" ")}`),
    },
  ];
  const route = createRouter(routes, ({ url }) => void calls.push(`fallback ${url.pathname}`));
  const send = (method: string, url: string) =>
    route({ method, url } as IncomingMessage, {} as ServerResponse);
  return { calls, send };
}

describe("createRouter", () => {
  it("hands a request to the route of its method and path, with the pattern's groups", async () => {
    const { calls, send } = routerRecording();
    await send("POST", "/api/chat");
    await send("GET", "/api/info?x=1");
    await send("HEAD", "/api/info");
    await send("GET", "/api/sessions/bot/s%201/events");
    expect(calls).toEqual(["chat", "info", "info", "events bot s%201"]);
  });

  it("answers 405 naming the method for a routed path asked with another one", async () => {
    const { calls, send } = routerRecording();
    const failure = await send("GET", "/api/chat").catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(HttpError);
    expect(failure).toMatchObject({
      status: 405,
      code: "http_request",
      responseCode: "method_not_allowed",
      message: "/api/chat takes POST",
    });
    expect(calls).toEqual([]);
  });

  it("leaves every other path to the fallback", async () => {
    const { calls, send } = routerRecording();
    await send("GET", "/app.js");
    await send("DELETE", "/api/nothing");
    expect(calls).toEqual(["fallback /app.js", "fallback /api/nothing"]);
  });
});
