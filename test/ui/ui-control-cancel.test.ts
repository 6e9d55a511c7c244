import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { slowOrEchoBackend } from "../support/slow-or-echo.js";

/**
 * The UI's `POST /api/control` with `command: "cancel"` and the `id` a chat request was sent with
 * (by any client of the NATS contract, e.g. a door): the host stops that chat alone.
 */

let bus: LocalBus;
let host: RunningHost;
let ui: UiServer;
const backend = slowOrEchoBackend();

beforeAll(async () => {
  bus = new LocalBus();
  host = await startHost({ bus, agents: [{ name: "bot", backend }] });
  ui = await startUiServer({ bus });
});

afterAll(async () => {
  await ui?.close();
  await host?.close();
  await bus?.close();
});

function postControl(body: unknown): Promise<Response> {
  return fetch(new URL("/api/control", ui.url), {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

async function chat(body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const reply = await bus.request("agentloop.agents.bot.chat", JSON.stringify(body), { timeoutMs: 10_000 });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

describe("POST /api/control cancel", () => {
  it("cancels the running chat request with that id; the session's next chat goes on", async () => {
    const before = backend.requests.length;
    const running = chat({ session: "u1", text: "slow", id: "ui-run-1" });
    await expect.poll(() => backend.requests.length).toBe(before + 1);
    const next = chat({ session: "u1", text: "next", id: "ui-next-1" });
    const response = await postControl({ agent: "bot", session: "u1", command: "cancel", id: "ui-run-1" });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ ok: true });
    expect(await running).toMatchObject({ ok: false, id: "ui-run-1", error: { code: "cancelled" } });
    expect(await next).toMatchObject({ ok: true, id: "ui-next-1", result: "echo: next" });
  });

  it("refuses a cancel without an id, or with an empty or overlong one, naming the field", async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{}, /missing field "id"/],
      [{ id: "" }, /field "id": must not be empty/],
      [{ id: "x".repeat(257) }, /field "id"/],
      [{ id: 42 }, /field "id"/],
    ];
    for (const [extra, message] of cases) {
      const response = await postControl({ agent: "bot", session: "u2", command: "cancel", ...extra });
      expect(response.status).toBe(400);
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(body.error).toMatchObject({ code: "bad_request" });
      expect(body.error.message).toMatch(message);
    }
  });
});
