import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect, headers } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { CorruptHistoryError, HistoryConflictError } from "../../src/context/history-errors.js";
import { JetStreamRecordLog } from "../../src/context/jetstream-record-log.js";
import {
  historyStreamName,
  historySubject,
  NatsHistoryStore,
  type NatsHistoryStoreOptions,
} from "../../src/context/nats-history-store.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { countRequests } from "../support/counted-requests.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { describeHistoryContract, type HistoryBackend } from "./history-contract.js";
import { conversation } from "./history-fixtures.js";

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "nats-history-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

/** A store on its own prefix (so its own stream), removed afterwards. */
async function openStore(options: Omit<NatsHistoryStoreOptions, "prefix"> = {}) {
  const prefix = uniqueRoot();
  const store = await NatsHistoryStore.open(bus.connection, { prefix, ...options });
  const remove = async () => {
    const manager = await jetstreamManager(bus.connection);
    await manager.streams.delete(store.stream);
  };
  return { store, prefix, remove };
}

/** Writes a record straight to the session's subject, as another (older) writer would. */
async function rawLog(store: NatsHistoryStore, agent: string, session: string) {
  return new JetStreamRecordLog({
    js: jetstream(bus.connection),
    jsm: await jetstreamManager(bus.connection),
    stream: store.stream,
    subject: historySubject(store.prefix, agent, session),
    maxPartBytes: () => store.maxPartBytes(),
  });
}

async function natsBackend(): Promise<HistoryBackend> {
  const { store, remove } = await openStore();
  return {
    open: (agent, session) => store.history(agent, session),
    async plant(agent, session, message) {
      await (await rawLog(store, agent, session)).write(
        "append",
        new TextEncoder().encode(JSON.stringify([message])),
        undefined,
      );
    },
    maxPayloadBytes: bus.connection.info?.max_payload ?? 1024 * 1024,
    cleanup: remove,
  };
}

describeHistoryContract("NatsContextHistory", natsBackend);

describe("NatsContextHistory on JetStream", () => {
  it("names its stream and subjects after the prefix", async () => {
    expect(historyStreamName()).toBe("AGENTLOOP_HISTORY");
    expect(historyStreamName("acme.agents")).toBe("ACME_AGENTS_HISTORY");
    expect(historySubject("agentloop", "bot", "s1")).toBe("agentloop.history.bot.s1");
    const { store, prefix, remove } = await openStore();
    try {
      const manager = await jetstreamManager(bus.connection);
      const info = await manager.streams.info(store.stream);
      expect(info.config.subjects).toEqual([`${prefix}.history.>`]);
      // Opening again (a second host) keeps the stream as it is.
      await NatsHistoryStore.open(bus.connection, { prefix });
      expect((await manager.streams.info(store.stream)).config.subjects).toEqual([`${prefix}.history.>`]);
    } finally {
      await remove();
    }
  });

  it("refuses a second writer's append after the first wrote: nothing interleaves silently", async () => {
    const { store, remove } = await openStore();
    try {
      const first = store.history("bot", "s1");
      const second = store.history("bot", "s1");
      expect(await first.restore()).toEqual([]);
      expect(await second.restore()).toEqual([]);
      await first.append(conversation.slice(0, 2));
      const refused = await second
        .append([{ role: "user", content: "from the stale writer" }])
        .catch((e) => e);
      expect(refused).toBeInstanceOf(HistoryConflictError);
      expect(refused.message).toMatch(
        /^history conflict \(agent "bot", session "s1"\): another writer changed it/,
      );
      await expect(second.replace([{ role: "user", content: "stale summary" }])).rejects.toBeInstanceOf(
        HistoryConflictError,
      );
      await expect(second.clear()).rejects.toBeInstanceOf(HistoryConflictError);
      expect(await store.history("bot", "s1").restore()).toEqual(conversation.slice(0, 2));
      // Restoring catches the writer up; then it may write again, and the first one is the stale one.
      expect(await second.restore()).toEqual(conversation.slice(0, 2));
      await second.append(conversation.slice(2));
      await expect(first.append([{ role: "user", content: "late" }])).rejects.toBeInstanceOf(
        HistoryConflictError,
      );
      expect(await store.history("bot", "s1").restore()).toEqual(conversation);
    } finally {
      await remove();
    }
  });

  it("lets exactly one of two concurrent writers append over the same state", async () => {
    const { store, remove } = await openStore();
    try {
      const writers = [store.history("bot", "s1"), store.history("bot", "s1")];
      await Promise.all(writers.map((writer) => writer.restore()));
      const outcomes = await Promise.allSettled(
        writers.map((writer, index) => writer.append([{ role: "user", content: `writer ${index}` }])),
      );
      expect(outcomes.filter((outcome) => outcome.status === "fulfilled")).toHaveLength(1);
      const rejected = outcomes.find((outcome) => outcome.status === "rejected");
      expect((rejected as PromiseRejectedResult).reason).toBeInstanceOf(HistoryConflictError);
      expect(await store.history("bot", "s1").restore()).toHaveLength(1);
    } finally {
      await remove();
    }
  });

  it("calls the fence before every write, and writes nothing when it throws", async () => {
    const { store, remove } = await openStore();
    try {
      let isOwner = true;
      let calls = 0;
      const history = store.history("bot", "s1", {
        fence: () => {
          calls += 1;
          if (!isOwner) throw new Error("lost the lease");
        },
      });
      await history.append(conversation.slice(0, 1));
      await history.saveSeq(10);
      expect(calls).toBe(2);
      isOwner = false;
      await expect(history.append(conversation.slice(1))).rejects.toThrow("lost the lease");
      await expect(history.replace([])).rejects.toThrow("lost the lease");
      await expect(history.saveSeq(20)).rejects.toThrow("lost the lease");
      expect(await store.history("bot", "s1").restore()).toEqual(conversation.slice(0, 1));
      expect(await store.history("bot", "s1").loadSeq()).toBe(10);
    } finally {
      await remove();
    }
  });

  it("splits a write into parts under the part limit, and keeps only whole records", async () => {
    const { store, remove } = await openStore({ maxPartBytes: 64 });
    try {
      const history = store.history("bot", "s1");
      await history.append(conversation);
      // A writer that died between two parts of its record: the whole record is skipped.
      const raw = await rawLog(store, "bot", "s1");
      const body = new TextEncoder().encode(JSON.stringify([{ role: "user", content: "never finished" }]));
      const partial = headers();
      partial.set("Agentloop-Record", "append");
      partial.set("Agentloop-Batch", "dead-writer");
      partial.set("Agentloop-Part", "1/2");
      await jetstream(bus.connection).publish(raw.subject, body, { headers: partial });
      const restored = store.history("bot", "s1");
      expect(await restored.restore()).toEqual(conversation);
      await restored.append([{ role: "user", content: "after the crash" }]);
      expect(await store.history("bot", "s1").restore()).toEqual([
        ...conversation,
        { role: "user", content: "after the crash" },
      ]);
      const manager = await jetstreamManager(bus.connection);
      const info = await manager.streams.info(store.stream, { subjects_filter: raw.subject });
      expect(info.state.subjects?.[raw.subject]).toBeGreaterThan(conversation.length);
    } finally {
      await remove();
    }
  });

  it("reads back a subject of more messages than one fetch brings", async () => {
    const { store, remove } = await openStore({ maxPartBytes: 8 });
    try {
      const history = store.history("bot", "s1");
      for (let round = 0; round < 3; round++) await history.append(conversation);
      const subject = historySubject(store.prefix, "bot", "s1");
      const manager = await jetstreamManager(bus.connection);
      const info = await manager.streams.info(store.stream, { subjects_filter: subject });
      expect(info.state.subjects?.[subject]).toBeGreaterThan(256);
      expect(await store.history("bot", "s1").restore()).toEqual([
        ...conversation,
        ...conversation,
        ...conversation,
      ]);
    } finally {
      await remove();
    }
  });

  it("reads back histories of every length, among other sessions' messages and its own marks", async () => {
    const { store, remove } = await openStore();
    try {
      // From one message to past the few it gets one by one before it takes a consumer; a session
      // whose name extends this one's, and this one's marks, write between its appends.
      const history = store.history("bot", "s1");
      const neighbour = store.history("bot", "s10");
      const written: typeof conversation = [];
      for (let count = 1; count <= 12; count++) {
        const message = conversation[count % conversation.length]!;
        await history.append([message]);
        written.push(message);
        await neighbour.append([conversation[0]!]);
        await history.saveSeq(count);
        expect(await store.history("bot", "s1").restore()).toEqual(written);
      }
      await history.replace(written.slice(0, 2));
      await history.append(written.slice(2, 3));
      expect(await store.history("bot", "s1").restore()).toEqual(written.slice(0, 3));
      expect(await store.history("bot", "s1").loadSeq()).toBe(12);
      expect(await store.history("bot", "s10").restore()).toHaveLength(12);
    } finally {
      await remove();
    }
  });

  it("purges what a compaction replaced: the subject keeps the snapshot only", async () => {
    const { store, remove } = await openStore();
    try {
      const history = store.history("bot", "s1");
      await history.append(conversation.slice(0, 2));
      await history.append(conversation.slice(2));
      await history.replace([{ role: "user", content: "Summary." }]);
      const subject = historySubject(store.prefix, "bot", "s1");
      const manager = await jetstreamManager(bus.connection);
      const info = await manager.streams.info(store.stream, { subjects_filter: subject });
      expect(info.state.subjects?.[subject]).toBe(1);
    } finally {
      await remove();
    }
  });

  it("fails with a clear error on a message that is not a history record", async () => {
    const { store, remove } = await openStore();
    try {
      await store.history("bot", "s1").append(conversation.slice(0, 1));
      await jetstream(bus.connection).publish(historySubject(store.prefix, "bot", "s1"), "stray");
      const error = await store
        .history("bot", "s1")
        .restore()
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CorruptHistoryError);
      expect((error as Error).message).toMatch(
        /^corrupt history row \(agent "bot", session "s1", position \d+\): not a history record/,
      );
    } finally {
      await remove();
    }
  });
});

describe("a session's opening reads on JetStream", () => {
  /** A connection of its own, counting the requests sent on it (message gets and publishes). */
  async function countingStore() {
    const connection = await connect({ servers: server.url, name: "nats-history-opening-test" });
    const requests = countRequests(connection);
    const prefix = uniqueRoot();
    const store = await NatsHistoryStore.open(connection, { prefix });
    return {
      store,
      requests,
      close: async () => {
        const manager = await jetstreamManager(connection);
        await manager.streams.delete(store.stream);
        await connection.close();
      },
    };
  }

  it("fetches the seq mark, the pending approval and the messages at the first read; the other two send nothing", async () => {
    const { store, requests, close } = await countingStore();
    try {
      const writer = store.history("bot", "s1");
      await writer.append(conversation.slice(0, 2));
      await writer.append(conversation.slice(2));
      await writer.saveSeq(40);

      const opened = store.history("bot", "s1");
      const before = requests();
      expect(await opened.loadSeq()).toBe(40);
      expect(await opened.loadPendingApproval()).toBeUndefined();
      expect(await opened.restore()).toEqual(conversation);
      // The messages' first and last (the last names the first as the one before it), the seq
      // mark's last, the approval's last.
      expect(requests() - before).toBe(4);
      // Each part answers one read: the next goes to the server.
      expect(await opened.loadSeq()).toBe(40);
      expect(requests() - before).toBe(5);
    } finally {
      await close();
    }
  });

  it("finds the records between the first and the last walking back from the last, one get each", async () => {
    const { store, requests, close } = await countingStore();
    try {
      const writer = store.history("bot", "s1");
      for (const message of conversation.slice(0, 4)) await writer.append([message]);
      await store.history("bot", "s2").append(conversation.slice(0, 1));
      const before = requests();
      expect(await store.history("bot", "s1").restore()).toEqual(conversation.slice(0, 4));
      // Four opening requests (first, last, seq mark, approval), then the two records between.
      expect(requests() - before).toBe(6);
    } finally {
      await close();
    }
  });

  it("reads forward a subject whose records were written without an expected last sequence", async () => {
    const { store, close } = await countingStore();
    try {
      const raw = await rawLog(store, "bot", "s1");
      for (const message of conversation) {
        await raw.write("append", new TextEncoder().encode(JSON.stringify([message])), undefined);
      }
      expect(await store.history("bot", "s1").restore()).toEqual(conversation);
    } finally {
      await close();
    }
  });

  it("writes the next seq mark over the one it read, without reading it again", async () => {
    const { store, requests, close } = await countingStore();
    try {
      const history = store.history("bot", "s1");
      // Not the stream's first message: the server reads a purge before sequence 1 as no bound, so none is sent.
      await history.append(conversation.slice(0, 1));
      expect(await history.loadSeq()).toBe(0);
      const before = requests();
      await history.saveSeq(1_000);
      await history.saveSeq(2_000);
      // Each mark: its publish and the purge of the one before it.
      expect(requests() - before).toBe(4);
      expect(await store.history("bot", "s1").loadSeq()).toBe(2_000);
    } finally {
      await close();
    }
  });

  it("never lowers a seq mark another writer moved since it was read", async () => {
    const { store, close } = await countingStore();
    try {
      const stale = store.history("bot", "s1");
      expect(await stale.loadSeq()).toBe(0);
      await store.history("bot", "s1").saveSeq(5_000);
      await stale.saveSeq(3_000);
      expect(await store.history("bot", "s1").loadSeq()).toBe(5_000);
      await stale.saveSeq(6_000);
      expect(await store.history("bot", "s1").loadSeq()).toBe(6_000);
    } finally {
      await close();
    }
  });

  it("answers a read after a write from the server, not from what the opening fetched", async () => {
    const { store, close } = await countingStore();
    try {
      await store.history("bot", "s1").append(conversation.slice(0, 2));
      const opened = store.history("bot", "s1");
      expect(await opened.loadSeq()).toBe(0);
      await opened.append(conversation.slice(2));
      expect(await opened.restore()).toEqual(conversation);
    } finally {
      await close();
    }
  });

  it("keeps a later read's view of another writer's records: a part is taken once", async () => {
    const { store, close } = await countingStore();
    try {
      const opened = store.history("bot", "s1");
      expect(await opened.restore()).toEqual([]);
      await store.history("bot", "s1").append(conversation.slice(0, 2));
      expect(await opened.restore()).toEqual(conversation.slice(0, 2));
    } finally {
      await close();
    }
  });
});
