import { describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { parseSessionHeartbeat } from "../../src/bus/session-heartbeat.js";
import { SessionHeartbeats } from "../../src/host/session-heartbeats.js";
import { record } from "../bus/bus-helpers.js";

describe("SessionHeartbeats (the host's side of the session heartbeat)", () => {
  it("beats at once per request in hand, counts them per session, and stops with the last release", async () => {
    const bus = new LocalBus();
    const beats = record(bus, "acme.sessions.>");
    const heartbeats = new SessionHeartbeats({
      bus,
      prefix: "acme",
      hostId: "h1",
      intervalMs: 60_000,
      now: () => Date.UTC(2026, 0, 1),
    });
    const first = heartbeats.track("bot", "s1");
    const second = heartbeats.track("bot", "s1");
    const other = heartbeats.track("bot", "s2");
    await beats.waitFor(3);
    expect(beats.messages.map((message) => [message.subject, parseSessionHeartbeat(message.data)])).toEqual([
      [
        "acme.sessions.bot.s1.heartbeat",
        {
          host: "h1",
          agent: "bot",
          session: "s1",
          ts: "2026-01-01T00:00:00.000Z",
          intervalMs: 60_000,
          requests: 1,
        },
      ],
      ["acme.sessions.bot.s1.heartbeat", expect.objectContaining({ session: "s1", requests: 2 })],
      ["acme.sessions.bot.s2.heartbeat", expect.objectContaining({ session: "s2", requests: 1 })],
    ]);
    first();
    first();
    expect(heartbeats.size).toBe(2);
    second();
    other();
    expect(heartbeats.size).toBe(0);
    heartbeats.close();
    await bus.close();
  });
});
