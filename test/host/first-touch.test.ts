import { jetstreamManager } from "@nats-io/jetstream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent } from "../../src/agent/create-agent.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { NatsHistoryStore } from "../../src/context/nats-history-store.js";
import { createSessionFactory } from "../../src/host/session-factory.js";
import { SessionManager } from "../../src/host/session-manager.js";
import type { ChatJournal } from "../../src/journal/chat-journal.js";
import { KvChatJournal } from "../../src/journal/kv-chat-journal.js";
import { scriptedModel } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { conversation } from "../context/history-fixtures.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "first-touch-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

/** The journal, counting how often each session's records are read. */
function countingReads(journal: ChatJournal): { journal: ChatJournal; reads: Map<string, number> } {
  const reads = new Map<string, number>();
  const counted: ChatJournal = {
    load: (agent, session) => journal.load(agent, session),
    readRecords: (agent, session) => {
      reads.set(`${agent}/${session}`, (reads.get(`${agent}/${session}`) ?? 0) + 1);
      return journal.readRecords(agent, session);
    },
    append: (agent, session, record) => journal.append(agent, session, record),
    compact: (agent, session, record) => journal.compact(agent, session, record),
    remove: (agent, session) => journal.remove(agent, session),
    list: () => journal.list(),
  };
  return { journal: counted, reads };
}

describe("a session's first touch on a JetStream history", () => {
  it("builds a session asked for by many requests at once one time, from what is stored", async () => {
    const prefix = uniqueRoot();
    const store = await NatsHistoryStore.open(bus.connection, { prefix });
    const stored = await KvChatJournal.open(bus.connection, { bucket: `${prefix}_JOURNAL` });
    // What the session's last host left: a conversation, a seq mark and tools its callers need approved.
    const history = store.history("bot", "s1");
    await history.append(conversation.slice(0, 2));
    await history.append(conversation.slice(2));
    await history.saveSeq(7);
    await stored.append("bot", "s1", { n: 1, id: "r1", steps: [{ kind: "approval", toolNames: ["shell"] }] });

    const { journal, reads } = countingReads(stored);
    let builds = 0;
    const sessions = new SessionManager({
      createSession: createSessionFactory({
        createAgent: (agent, session) => {
          builds++;
          return createAgent({
            name: agent,
            session,
            llm: scriptedModel([]),
            model: "test",
            history: store.history(agent, session),
            journal,
          });
        },
      }),
    });
    try {
      const actors = await Promise.all(
        Array.from({ length: 40 }, () => sessions.use("bot", "s1", (actor) => actor, { isChat: true })),
      );
      expect(new Set(actors).size).toBe(1);
      expect(builds).toBe(1);
      expect(reads.get("bot/s1")).toBe(1);
      const [actor] = actors;
      expect(actor?.agent.messages).toEqual(conversation);
      expect(actor?.agent.journal?.approvalRequired).toEqual(["shell"]);
    } finally {
      await sessions.close();
      const manager = await jetstreamManager(bus.connection);
      await manager.streams.delete(store.stream);
      await manager.streams.delete(`KV_${prefix}_JOURNAL`);
    }
  });
});
