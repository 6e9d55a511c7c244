import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { startServe, waitUntilServing } from "./running-serve.js";

/**
 * Regression: `serve` on NATS takes requests through its `$SRV` endpoints, whose message
 * conversion once skipped the UTF-8 check the plain subscriptions made, so a chat whose bytes were
 * not UTF-8 ran on U+FFFD ("You said: hi ��") instead of being refused. Every door now converts
 * through one function; this goes through the listener production uses.
 */

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "one-ingress-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

describe("every request door converts bytes the same way", () => {
  it("answers bad_request to a chat whose bytes are not UTF-8, through serve's $SRV endpoint", async () => {
    const prefix = uniqueRoot();
    const serve = startServe(["--nats", server.url, "--prefix", prefix]);
    try {
      await waitUntilServing(bus, prefix, serve);
      const head = new TextEncoder().encode('{"session":"u1","text":"hi ');
      const payload = new Uint8Array([...head, 0xff, 0xfe, 0x22, 0x7d]);
      const reply = await bus.connection.request(chatSubject(prefix, "assistant"), payload, {
        timeout: 15_000,
      });
      expect(JSON.parse(reply.string())).toEqual({
        ok: false,
        error: { code: "bad_request", message: expect.stringContaining("not valid UTF-8") },
      });
      // The endpoint counted it as an error: it was the service that answered, not a fallback.
      const stats = await bus.connection.request(`$SRV.STATS.agentloop`, "", { timeout: 5_000 });
      const endpoints = (
        JSON.parse(stats.string()) as {
          endpoints: Array<{ name: string; data: { replies: { last_error?: string } }; subject: string }>;
        }
      ).endpoints;
      const chat = endpoints.find((endpoint) => endpoint.subject === `${prefix}.agents.*.chat`);
      expect(chat?.data.replies.last_error).toContain("not valid UTF-8");
      // The same text, well formed, still runs.
      const fine = await bus.request(
        chatSubject(prefix, "assistant"),
        JSON.stringify({ session: "u1", text: "hi" }),
        {
          timeoutMs: 15_000,
        },
      );
      expect(JSON.parse(fine.data)).toMatchObject({ ok: true, session: "u1" });
    } finally {
      await serve.stop();
    }
  });
});
