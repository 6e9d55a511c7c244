import { describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import type { AgentEvent } from "../../src/events/types.js";
import { startHostFixture } from "./host-fixture.js";

/**
 * An answer over the bus's max payload lost its reply (and its ChatCompleted),
 * and the client waited for its timeout. The host now answers `reply_too_large` with the chat's id.
 * (The in-process bus takes a small limit here; test/cli/serve-oversized-reply.test.ts runs the
 * same on a real nats-server.)
 */
describe("a chat answer over the bus's max payload", () => {
  it("is answered reply_too_large with the chatId and the client's id; its events are truncated, not lost", async () => {
    const bus = new LocalBus({ maxPayload: 4_096 });
    const lines: string[] = [];
    const chunk = "0123456789".repeat(300);
    const fixture = await startHostFixture(bus, {
      scripts: { bot: [{ deltas: [chunk, chunk, chunk] }] },
      host: { log: (line) => lines.push(line) },
    });
    const reply = await fixture.request("bot", "chat", { session: "big", text: "tell me all", id: "q1" });
    const completed = fixture.events
      .map(({ event }) => event)
      .find(
        (event): event is Extract<AgentEvent, { kind: "ChatCompleted" }> => event.kind === "ChatCompleted",
      );
    expect(completed).toBeDefined();
    expect(reply).toEqual({
      ok: false,
      error: {
        code: "reply_too_large",
        message: expect.stringMatching(
          new RegExp(
            `^the reply is \\d+ bytes, over the bus's 4096-byte limit; the full result is in the session history \\(chat ${completed?.chatId}\\)$`,
          ),
        ),
      },
      chatId: completed?.chatId,
      id: "q1",
    });
    expect(completed).toMatchObject({
      truncated: true,
      result: expect.stringMatching(/^0123456789.*…\[truncated: /),
    });
    // The deltas fit: they go out as they are.
    const deltas = fixture.events.filter(({ event }) => event.kind === "ModelTextDelta");
    expect(deltas.map(({ event }) => (event as { delta: string }).delta)).toEqual([chunk, chunk, chunk]);
    expect(lines).toEqual([expect.stringMatching(/^answered .*\.agents\.bot\.chat with reply_too_large: /)]);
    expect(bus.droppedPublishes).toBe(0);
    await fixture.close();
    await bus.close();
  });
});
