import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { slowOrEchoBackend } from "../support/slow-or-echo.js";

/**
 * The control `cancel`: one chat request, named by its `id`, is cancelled on its own — taken out of
 * the session's queue, stopped while it runs, or answered `cancelled` when it arrives after its cancel —
 * and the session's other chats go on.
 */

let bus: LocalBus;
let host: RunningHost;
const backend = slowOrEchoBackend();

beforeAll(async () => {
  bus = new LocalBus();
  host = await startHost({ bus, agents: [{ name: "bot", backend }] });
});

afterAll(async () => {
  await host?.close();
  await bus?.close();
});

async function ask(
  verb: "chat" | "control",
  body: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const reply = await bus.request(`agentloop.agents.bot.${verb}`, JSON.stringify(body), {
    timeoutMs: 10_000,
  });
  return JSON.parse(reply.data) as Record<string, unknown>;
}

describe("control cancel", () => {
  it("needs the id of the chat request it cancels", async () => {
    expect(await ask("control", { session: "c0", command: "cancel" })).toMatchObject({
      ok: false,
      error: { code: "bad_request" },
    });
    // Nothing of that id here: nothing to do, and it says ok.
    expect(await ask("control", { session: "c0", command: "cancel", id: "nothing" })).toEqual({ ok: true });
  });

  it("stops a running chat by its id and takes a queued one out without running it; the rest go on", async () => {
    const before = backend.requests.length;
    const running = ask("chat", { session: "c1", text: "slow", id: "run-1" });
    await expect.poll(() => backend.requests.length).toBe(before + 1);
    const queued = ask("chat", { session: "c1", text: "queued", id: "queued-1" });
    const after = ask("chat", { session: "c1", text: "after", id: "after-1" });
    expect(await ask("control", { session: "c1", command: "cancel", id: "queued-1" })).toEqual({ ok: true });
    expect(await queued).toMatchObject({ ok: false, id: "queued-1", error: { code: "cancelled" } });
    expect(await ask("control", { session: "c1", command: "cancel", id: "run-1" })).toEqual({ ok: true });
    expect(await running).toMatchObject({ ok: false, id: "run-1", error: { code: "cancelled" } });
    expect(await after).toMatchObject({ ok: true, id: "after-1", result: "echo: after" });
    const asked = backend.requests.slice(before).map((request) => String(request.messages.at(-1)?.content));
    expect(asked).toEqual(["slow", "after"]);
  });

  it("answers cancelled, without running it, a chat request that arrives after its cancel", async () => {
    const before = backend.requests.length;
    expect(await ask("control", { session: "c2", command: "cancel", id: "late-1" })).toEqual({ ok: true });
    expect(await ask("chat", { session: "c2", text: "too late", id: "late-1" })).toMatchObject({
      ok: false,
      error: { code: "cancelled" },
    });
    expect(backend.requests.length).toBe(before);
    expect(await ask("chat", { session: "c2", text: "fresh", id: "late-2" })).toMatchObject({
      ok: true,
      result: "echo: fresh",
    });
  });
});
