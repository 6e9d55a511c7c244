import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { createConnection } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { BusMessage } from "../../src/bus/bus.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { controlSubject } from "../../src/bus/subjects.js";
import { startUiServer, type UiServer, type UiServerOptions } from "../../src/ui/ui-server.js";
import { loopLikeMachine } from "../viz/test-machines.js";

/**
 * Who the UI lets in, over real HTTP on 127.0.0.1: the Host and Origin checks that stop DNS
 * rebinding and other sites' pages, the token required off loopback, the security headers on
 * every response, and the cap on event streams.
 */

interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

interface Sent {
  method?: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** Leave the Host header out (HTTP/1.0 style). */
  noHost?: boolean;
}

let bus: LocalBus;
let server: UiServer;
let logged: string[];
/** Control requests that reached the agent (what a refused request must never do). */
let controls: unknown[];

async function start(options: Partial<UiServerOptions> = {}): Promise<void> {
  bus = new LocalBus();
  logged = [];
  controls = [];
  bus.subscribe(controlSubject("agentloop", "assistant"), (message: BusMessage) => {
    controls.push(JSON.parse(message.data));
    bus.respond(message, JSON.stringify({ ok: true }));
  });
  server = await startUiServer({
    bus,
    getMachine: (name) => (name === "loop" ? loopLikeMachine : undefined),
    machineNames: ["loop"],
    log: (line) => logged.push(line),
    ...options,
  });
}

afterEach(async () => {
  await server?.close();
  await bus?.close();
});

function portOf(): number {
  return Number(new URL(server.url).port);
}

/** One request to 127.0.0.1 with exactly the headers given (Host defaults to 127.0.0.1:port). */
function send({ method = "GET", path, headers = {}, body, noHost }: Sent): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(
      {
        host: "127.0.0.1",
        port: portOf(),
        method,
        path,
        setHost: false,
        headers: { ...(noHost ? {} : { host: `127.0.0.1:${portOf()}` }), ...headers },
      },
      (response) => {
        let text = "";
        response.setEncoding("utf8");
        // A stream that was let in: the headers are the answer; stop reading.
        if ((response.headers["content-type"] ?? "").startsWith("text/event-stream")) {
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: "" });
          response.destroy();
          return;
        }
        response.on("data", (chunk: string) => {
          text += chunk;
        });
        response.on("end", () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: text }),
        );
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

const APPROVE = JSON.stringify({
  agent: "assistant",
  session: "victim",
  command: "approve",
  toolCallId: "call_2",
});

function postControl(headers: Record<string, string>): Promise<Reply> {
  return send({
    method: "POST",
    path: "/api/control",
    headers: { "content-type": "application/json", ...headers },
    body: APPROVE,
  });
}

function errorOf(reply: Reply): { code: string; message: string } {
  const body = JSON.parse(reply.body) as { ok: boolean; error: { code: string; message: string } };
  expect(body.ok).toBe(false);
  return body.error;
}

function expectSecurityHeaders(reply: Reply): void {
  expect(reply.headers["content-security-policy"]).toMatch(/default-src 'self'/);
  expect(reply.headers["content-security-policy"]).toMatch(/frame-ancestors 'none'/);
  expect(reply.headers["x-frame-options"]).toBe("DENY");
  expect(reply.headers["x-content-type-options"]).toBe("nosniff");
  expect(reply.headers["referrer-policy"]).toBe("no-referrer");
}

describe("Host", () => {
  it("refuses a rebound name: the held tool call is not approved (403 forbidden, logged with its rule)", async () => {
    await start();
    const port = portOf();
    const reply = await postControl({ host: `evil.example:${port}`, origin: `http://evil.example:${port}` });
    expect(reply.status).toBe(403);
    expect(errorOf(reply)).toEqual({ code: "forbidden", message: expect.stringContaining("evil.example") });
    expect(reply.body).not.toContain("\n");
    expect(controls).toEqual([]);
    expect(logged).toEqual([
      expect.stringMatching(/^refused POST \/api\/control from 127\.0\.0\.1 \(rule: host\): /),
    ]);
    const reads = await send({ path: "/api/sessions", headers: { host: `evil.example:${port}` } });
    expect(reads.status).toBe(403);
    const page = await send({ path: "/", headers: { host: `evil.example:${port}` } });
    expect(page.status).toBe(403);
    expect(server.stats().refused.host).toBe(3);
  });

  it("lets in loopback names with this port, and nothing else", async () => {
    await start();
    const port = portOf();
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`]) {
      expect({ host, status: (await send({ path: "/api/sessions", headers: { host } })).status }).toEqual({
        host,
        status: 200,
      });
    }
    for (const host of [
      `127.0.0.1:${port + 1}`,
      "localhost",
      `localhost.:${port}`,
      `a@localhost:${port}`,
      `x.localhost:${port}`,
    ]) {
      expect({ host, status: (await send({ path: "/api/sessions", headers: { host } })).status }).toEqual({
        host,
        status: 403,
      });
    }
    const missing = await send({ path: "/api/sessions", noHost: true });
    expect(missing.status).toBe(403);
    expect(errorOf(missing).message).toMatch(/no Host header/);
  });

  it("lets in the names of --ui-allowed-hosts: a bare name on any port, name:port on that port only", async () => {
    await start({ allowedHosts: ["agents.example", "proxy.example:8443"] });
    const status = async (host: string) => (await send({ path: "/api/sessions", headers: { host } })).status;
    expect(await status("agents.example")).toBe(200);
    expect(await status("agents.example:9999")).toBe(200);
    expect(await status("proxy.example:8443")).toBe(200);
    expect(await status("proxy.example:8444")).toBe(403);
    expect(await status("other.example")).toBe(403);
  });
});

describe("a malformed request line", () => {
  it("is a 400 bad_request with the security headers, and the server keeps serving", async () => {
    await start();
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = createConnection({ host: "127.0.0.1", port: portOf() }, () => {
        socket.end(`GET //[bad HTTP/1.1\r\nHost: 127.0.0.1:${portOf()}\r\nConnection: close\r\n\r\n`);
      });
      let text = "";
      socket.setEncoding("utf8");
      socket.on("data", (chunk: string) => {
        text += chunk;
      });
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 /);
    expect(raw.toLowerCase()).toContain("x-frame-options: deny");
    expect(raw).toContain('"code":"bad_request"');
    expect((await send({ path: "/api/info" })).status).toBe(200);
  });
});

describe("Origin", () => {
  it("accepts the page's own origin and refuses other sites and null (the request never reaches the agent)", async () => {
    await start();
    const port = portOf();
    const own = await postControl({ origin: `http://127.0.0.1:${port}` });
    expect(own.status).toBe(200);
    expect(JSON.parse(own.body)).toEqual({ ok: true });
    expect(controls).toHaveLength(1);
    for (const origin of [
      "http://evil.example",
      `http://localhost:${port + 1}`,
      "null",
      "file://",
      `http://127.0.0.1:${port}/x`,
    ]) {
      const reply = await postControl({ origin });
      expect({ origin, status: reply.status, code: errorOf(reply).code }).toEqual({
        origin,
        status: 403,
        code: "forbidden",
      });
    }
    expect(controls).toHaveLength(1);
    const stream = await send({ path: "/api/events", headers: { origin: "http://evil.example" } });
    expect(stream.status).toBe(403);
    expect(server.stats().refused.origin).toBe(6);
    expect(logged.at(-1)).toMatch(/\(rule: origin\)/);
  });
});

describe("the token", () => {
  it("is made up when listening on every interface, printed in the URL, and required on every API call", async () => {
    await start({ host: "0.0.0.0", localAddresses: () => ["127.0.0.1", "10.9.8.7", "fe80::1", "fd00::7"] });
    expect(server.isExposed).toBe(true);
    const token = server.token;
    expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    const port = portOf();
    expect(server.urls).toEqual([
      `http://127.0.0.1:${port}/?token=${token}`,
      `http://10.9.8.7:${port}/?token=${token}`,
    ]);
    const none = await send({ path: "/api/sessions" });
    expect(none.status).toBe(401);
    expect(errorOf(none).code).toBe("unauthorized");
    expect(none.headers["www-authenticate"]).toMatch(/^Bearer/);
    expectSecurityHeaders(none);
    expect(
      (await send({ path: "/api/sessions", headers: { authorization: `Bearer ${token}x` } })).status,
    ).toBe(401);
    expect((await send({ path: "/api/sessions", headers: { authorization: `Basic ${token}` } })).status).toBe(
      401,
    );
    // Only the event stream takes it in the query (EventSource cannot set headers).
    expect((await send({ path: `/api/sessions?token=${token}` })).status).toBe(401);
    const denied = await postControl({});
    expect(denied.status).toBe(401);
    expect(controls).toEqual([]);
    expect(server.stats().refused.token).toBe(5);
    expect(logged.join("\n")).not.toContain(token);

    expect(
      (await send({ path: "/api/sessions", headers: { authorization: `Bearer ${token}` } })).status,
    ).toBe(200);
    expect((await send({ path: `/api/events?token=${token}` })).status).toBe(200);
    expect((await postControl({ authorization: `bearer ${token}` })).status).toBe(200);
    expect(controls).toHaveLength(1);
    // The page itself holds no data: it loads without the token, then reads it from its URL.
    const page = await send({ path: "/" });
    expect(page.status).toBe(200);
    expect(page.body).toContain("<title>agentloop</title>");
    // This machine's own address reaches it too (what the URLs above show); names still do not.
    expect(
      (
        await send({
          path: "/api/sessions",
          headers: { host: `10.9.8.7:${port}`, authorization: `Bearer ${token}` },
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await send({
          path: "/api/sessions",
          headers: { host: `10.9.8.8:${port}`, authorization: `Bearer ${token}` },
        })
      ).status,
    ).toBe(403);
  });

  it("given explicitly, is required on loopback too; without one, loopback needs none", async () => {
    await start({ token: "0123456789abcdef0123" });
    expect(server.url).toBe(`http://127.0.0.1:${portOf()}/?token=0123456789abcdef0123`);
    expect(server.isExposed).toBe(false);
    expect((await send({ path: "/api/info" })).status).toBe(401);
    const info = await send({ path: "/api/info", headers: { authorization: "Bearer 0123456789abcdef0123" } });
    expect(info.status).toBe(200);
    expect(JSON.parse(info.body).http).toEqual({
      refused: { host: 0, origin: 0, token: 1, streams: 0 },
      openStreams: 0,
    });
    await server.close();
    await bus.close();
    await start();
    expect(server.token).toBeUndefined();
    expect(server.url).toBe(`http://127.0.0.1:${portOf()}/`);
    expect((await send({ path: "/api/info" })).status).toBe(200);
  });
});

describe("security headers", () => {
  it("are on the page, its files, API answers, errors and refusals", async () => {
    await start();
    const replies = [
      await send({ path: "/" }),
      await send({ path: "/app.js" }),
      await send({ path: "/style.css" }),
      await send({ path: "/favicon.svg" }),
      await send({ path: "/api/info" }),
      await send({ path: "/api/machines/loop.svg" }),
      await send({ path: "/nope.html" }),
      await send({ method: "POST", path: "/api/chat", headers: { "content-type": "text/plain" }, body: "x" }),
      await send({ path: "/api/sessions", headers: { host: "evil.example" } }),
    ];
    expect(replies.map((reply) => reply.status)).toEqual([200, 200, 200, 200, 200, 200, 404, 415, 403]);
    for (const reply of replies) expectSecurityHeaders(reply);
  });

  it("leave the page nothing inline to allow: no inline script or style in index.html", async () => {
    await start();
    const html = (await send({ path: "/" })).body;
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style\b/);
    expect(html).not.toMatch(/\sstyle="/);
    expect(html).not.toMatch(/\son[a-z]+="/);
    expect(html).not.toMatch(/(href|src)="(data|https?):/);
  });
});

describe("event streams", () => {
  it("are capped per remote address: over the cap is 503 overloaded, counted; a closed one frees its place", async () => {
    await start({ maxStreams: 10, maxStreamsPerAddress: 2 });
    const open = () =>
      fetch(new URL("/api/events", server.url), { headers: {} }).then((response) => ({
        response,
        status: response.status,
      }));
    const first = await open();
    const second = await open();
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(server.stats().openStreams).toBe(2);
    const third = await open();
    expect(third.status).toBe(503);
    const body = (await third.response.json()) as { error: { code: string; message: string } };
    expect(body.error).toEqual({ code: "overloaded", message: expect.stringMatching(/2 per address/) });
    expect(server.stats().refused.streams).toBe(1);
    expect(logged.at(-1)).toMatch(/\(rule: streams\)/);
    await first.response.body?.cancel();
    await expect.poll(() => server.stats().openStreams).toBe(1);
    const again = await open();
    expect(again.status).toBe(200);
    await second.response.body?.cancel();
    await again.response.body?.cancel();
  });

  it("are capped for all clients together (--ui-max-streams)", async () => {
    await start({ maxStreams: 2, maxStreamsPerAddress: 5 });
    const streams = [
      await fetch(new URL("/api/events", server.url)),
      await fetch(new URL("/api/events", server.url)),
    ];
    const over = await fetch(new URL("/api/events", server.url));
    expect(over.status).toBe(503);
    expect(((await over.json()) as { error: { message: string } }).error.message).toMatch(/2 in all/);
    // Other routes are not streams and stay open to everyone.
    expect((await fetch(new URL("/api/sessions", server.url))).status).toBe(200);
    for (const stream of streams) await stream.body?.cancel();
  });
});

describe("the refusal log", () => {
  it("logs at most 20 refusals a minute and counts the rest, then says how many it left out", async () => {
    let now = 1_000_000;
    await start({ now: () => now });
    for (let i = 0; i < 25; i++) await send({ path: "/api/sessions", headers: { host: "evil.example" } });
    expect(logged).toHaveLength(20);
    expect(server.stats().refused.host).toBe(25);
    now += 60_000;
    await send({ path: "/api/sessions", headers: { host: "evil.example" } });
    expect(logged.slice(20)).toEqual([
      "5 more refusal(s) in the last minute were counted, not logged",
      expect.stringMatching(/rule: host/),
    ]);
  });
});
