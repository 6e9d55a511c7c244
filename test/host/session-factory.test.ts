import { describe, expect, it } from "vitest";
import { chatReplyOf, createSessionFactory, type SessionHooks } from "../../src/host/session-factory.js";
import { SessionManager } from "../../src/host/session-manager.js";
import { FakeAgent } from "./fake-agent.js";

describe("createSessionFactory", () => {
  it("builds a session the manager serves, whose agent posts into the session's own mailbox", async () => {
    const agents: FakeAgent[] = [];
    let hooksOf: SessionHooks | undefined;
    const sessions = new SessionManager({
      createSession: createSessionFactory({
        createAgent: async (agent, session, hooks) => {
          hooksOf = hooks;
          const created = new FakeAgent({ name: agent, session });
          agents.push(created);
          return created;
        },
        maxQueue: 5,
      }),
    });
    const actor = await sessions.open("bot", "s1", { isChat: true });
    expect(actor.name).toBe("bot");
    expect(actor.session).toBe("s1");
    expect(await actor.chat({ text: "hi" })).toMatchObject({ ok: true, result: "echo: hi" });
    // What a tool posts (ToolContext.post) is a message of this session.
    hooksOf?.post("from a tool");
    await expect.poll(() => agents[0]?.chats.map((chat) => chat.text)).toEqual(["hi", "from a tool"]);
    // No cluster: no lease fence.
    expect(hooksOf?.fence).toBeUndefined();
    await sessions.close();
  });

  it("rejects with the agent factory's error and says so in one line; the next use tries again", async () => {
    const lines: string[] = [];
    let attempts = 0;
    const sessions = new SessionManager({
      createSession: createSessionFactory({
        createAgent: async (agent, session) => {
          attempts++;
          if (attempts === 1) throw new Error("database is locked");
          return new FakeAgent({ name: agent, session });
        },
        log: (line) => lines.push(line),
      }),
    });
    await expect(sessions.open("bot", "s1")).rejects.toThrow("database is locked");
    expect(lines).toEqual(["could not start session bot/s1: database is locked"]);
    expect((await sessions.open("bot", "s1")).session).toBe("s1");
    await sessions.close();
  });
});

describe("chatReplyOf", () => {
  it("turns a chat's outcome into the wire reply, echoing the request id", () => {
    const usage = { prompt: 1, completion: 2, total: 3, cached: 0 };
    expect(chatReplyOf("s1", { ok: true, result: "done", usage, chatId: "c1" }, { id: "r1" })).toEqual({
      ok: true,
      session: "s1",
      result: "done",
      usage,
      id: "r1",
    });
    expect(chatReplyOf("s1", { ok: false, error: { code: "cancelled", message: "stopped" } }, {})).toEqual({
      ok: false,
      error: { code: "cancelled", message: "stopped" },
    });
  });
});
