import { describe, expect, it } from "vitest";
import { SessionActor } from "../../src/host/session-actor.js";
import { FakeAgent } from "./fake-agent.js";

describe("SessionActor: --max-session-bytes", () => {
  it("compacts a session over the limit before its next chat, which then runs", async () => {
    const agent = new FakeAgent();
    agent.memoryBytes = 5_000;
    agent.onCompact = async () => {
      agent.memoryBytes = 300;
    };
    const actor = new SessionActor({ agent, maxSessionBytes: 1_000 });
    expect(await actor.chatAndWait("hello")).toMatchObject({ ok: true, result: "echo: hello" });
    expect(agent.compactCalls).toEqual([undefined]);
    // Under the limit: no compaction before the next one.
    expect(await actor.chatAndWait("again")).toMatchObject({ ok: true });
    expect(agent.compactCalls).toHaveLength(1);
  });

  it("refuses the chat (bad_request) when the session is still over the limit after compaction", async () => {
    const agent = new FakeAgent();
    agent.memoryBytes = 5_000;
    const actor = new SessionActor({ agent, maxSessionBytes: 1_000 });
    const outcome = await actor.chatAndWait("hello");
    expect(outcome).toEqual({
      ok: false,
      error: {
        code: "bad_request",
        message:
          'the session holds about 5000 bytes after compaction, over the host\'s limit of 1000 bytes per session; send "new" to start over',
      },
    });
    expect(agent.chats).toEqual([]);
    // A failed compaction says why.
    agent.compactResult = new Error("the model is down");
    expect(await actor.chatAndWait("hello")).toMatchObject({
      ok: false,
      error: {
        code: "bad_request",
        message: expect.stringContaining("compacting it failed (the model is down)"),
      },
    });
    // `new` brings it under: the next chat runs.
    expect(await actor.reset()).toEqual({ ok: true });
    agent.memoryBytes = 0;
    expect(await actor.chatAndWait("fresh")).toMatchObject({ ok: true, result: "echo: fresh" });
  });
});
