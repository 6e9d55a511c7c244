import { jetstreamManager } from "@nats-io/jetstream";
import { nanos } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BusError } from "../../src/bus/bus-errors.js";
import {
  DEFAULT_EVENT_MAX_AGE_MS,
  EVENT_STREAM_NAME,
  ensureEventStream,
  eventStreamName,
  lastStoredSeq,
  replayEvents,
  type StoredEvent,
} from "../../src/bus/event-log.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { eventSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { uniqueRoot } from "./bus-helpers.js";

let server: NatsServer;
let bus: NatsBus;
/** Prefixes whose streams this file created: removed at the end (NATS_URL may be a lasting server). */
const prefixes: string[] = [];
beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "event-log-test" });
});
afterAll(async () => {
  const manager = await jetstreamManager(bus.connection);
  await Promise.all(
    prefixes.map((prefix) => manager.streams.delete(eventStreamName(prefix)).catch(() => false)),
  );
  await bus.close();
  await server.stop();
});

/** A subject prefix of this file's own; its stream is deleted after the run. */
function newPrefix(): string {
  const prefix = uniqueRoot();
  prefixes.push(prefix);
  return prefix;
}

function delta(session: string, seq: number, text: string): AgentEvent {
  return {
    kind: "ModelTextDelta",
    agent: "bot",
    session,
    chatId: "c1",
    seq,
    ts: new Date(0).toISOString(),
    iteration: 1,
    delta: text,
  };
}

/** Publishes with plain core-NATS publishes, as the hosts do, and waits until the stream holds them. */
async function publishStored(prefix: string, events: AgentEvent[]): Promise<void> {
  const manager = await jetstreamManager(bus.connection);
  const before = (await manager.streams.info(eventStreamName(prefix))).state.messages;
  for (const event of events) {
    bus.publish(eventSubject(prefix, event.agent, event.session, event.kind), JSON.stringify(event));
  }
  await bus.flush();
  const deadline = Date.now() + 5_000;
  while ((await manager.streams.info(eventStreamName(prefix))).state.messages < before + events.length) {
    if (Date.now() > deadline) throw new Error("the stream did not store the events");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function collect(iterable: AsyncIterable<StoredEvent>): Promise<StoredEvent[]> {
  const items: StoredEvent[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

describe("eventStreamName", () => {
  it("is AGENTLOOP_EVENTS for the default prefix and derived otherwise", () => {
    expect(eventStreamName()).toBe(EVENT_STREAM_NAME);
    expect(eventStreamName("agentloop")).toBe("AGENTLOOP_EVENTS");
    expect(eventStreamName("acme.al-1")).toBe("ACME_AL-1_EVENTS");
  });
});

describe("ensureEventStream", () => {
  it("creates a file-backed stream over <prefix>.events.> with bucket-level max_age, discarding old", async () => {
    const prefix = newPrefix();
    const name = await ensureEventStream(bus.connection, { prefix });
    expect(name).toBe(eventStreamName(prefix));
    const { config } = await (await jetstreamManager(bus.connection)).streams.info(name);
    expect(config).toMatchObject({
      subjects: [`${prefix}.events.>`],
      storage: "file",
      retention: "limits",
      discard: "old",
      max_age: nanos(DEFAULT_EVENT_MAX_AGE_MS),
    });
  });

  it("is idempotent and updates the retention of an existing stream", async () => {
    const prefix = newPrefix();
    await ensureEventStream(bus.connection, { prefix, maxAgeMs: 60_000 });
    await publishStored(prefix, [delta("s1", 1, "kept")]);
    await ensureEventStream(bus.connection, { prefix, maxAgeMs: 3_600_000 });
    const info = await (await jetstreamManager(bus.connection)).streams.info(eventStreamName(prefix));
    expect(info.config.max_age).toBe(nanos(3_600_000));
    expect(info.state.messages).toBe(1);
  });

  it("refuses a non-positive max age", async () => {
    await expect(ensureEventStream(bus.connection, { prefix: newPrefix(), maxAgeMs: 0 })).rejects.toThrow(
      RangeError,
    );
  });
});

describe("replayEvents", () => {
  let prefix: string;
  beforeAll(async () => {
    prefix = newPrefix();
    await ensureEventStream(bus.connection, { prefix, maxAgeMs: 600_000 });
    const events: AgentEvent[] = [];
    for (let index = 1; index <= 6; index++)
      events.push(delta(index % 2 === 0 ? "s2" : "s1", index, `d${index}`));
    await publishStored(prefix, events);
  });

  it("replays everything from a sequence, in order, then finishes", async () => {
    const stored = await collect(replayEvents(bus.connection, { prefix, since: { seq: 1 } }));
    expect(stored.map((item) => item.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(stored.map((item) => (item.event.kind === "ModelTextDelta" ? item.event.delta : ""))).toEqual([
      "d1",
      "d2",
      "d3",
      "d4",
      "d5",
      "d6",
    ]);
    expect(stored[0]?.subject).toBe(`${prefix}.events.bot.s1.ModelTextDelta`);
    expect(JSON.parse(stored[0]?.data ?? "")).toEqual(stored[0]?.event);
    expect(stored[0]?.time).toBeInstanceOf(Date);
  });

  it("starts at the given sequence", async () => {
    const stored = await collect(replayEvents(bus.connection, { prefix, since: { seq: 4 } }));
    expect(stored.map((item) => item.seq)).toEqual([4, 5, 6]);
  });

  it("filters to one session with a single subject filter", async () => {
    const stored = await collect(
      replayEvents(bus.connection, { prefix, filter: `${prefix}.events.*.s2.>`, since: { seq: 1 } }),
    );
    expect(stored.map((item) => item.event.session)).toEqual(["s2", "s2", "s2"]);
    expect(stored.map((item) => item.event.seq)).toEqual([2, 4, 6]);
  });

  it("finishes at once when nothing matches", async () => {
    await expect(collect(replayEvents(bus.connection, { prefix, since: { seq: 1000 } }))).resolves.toEqual(
      [],
    );
    const noSession = replayEvents(bus.connection, {
      prefix,
      filter: `${prefix}.events.*.nobody.>`,
      since: { seq: 1 },
    });
    await expect(collect(noSession)).resolves.toEqual([]);
  });

  it("replays the last duration of events", async () => {
    const durationPrefix = newPrefix();
    await ensureEventStream(bus.connection, { prefix: durationPrefix });
    await publishStored(durationPrefix, [delta("s1", 1, "old-1"), delta("s1", 2, "old-2")]);
    // Stored timestamps come from the server clock: leave a visible gap between the two batches.
    await new Promise((resolve) => setTimeout(resolve, 50));
    await publishStored(durationPrefix, [delta("s1", 3, "new-1"), delta("s1", 4, "new-2")]);
    const all = await collect(replayEvents(bus.connection, { prefix: durationPrefix, since: { seq: 1 } }));
    const firstNew = all[2]!.time.getTime();

    const recent = await collect(
      replayEvents(bus.connection, {
        prefix: durationPrefix,
        since: { durationMs: 60_000 },
        now: () => firstNew + 60_000,
      }),
    );
    expect(recent.map((item) => item.seq)).toEqual([3, 4]);

    const lastHour = await collect(
      replayEvents(bus.connection, { prefix: durationPrefix, since: { durationMs: 3_600_000 } }),
    );
    expect(lastHour.map((item) => item.seq)).toEqual([1, 2, 3, 4]);

    const fromTime = await collect(
      replayEvents(bus.connection, { prefix: durationPrefix, since: { time: new Date(firstNew) } }),
    );
    expect(fromTime.map((item) => item.seq)).toEqual([3, 4]);
  });

  it("skips payloads on the event subjects that are not events", async () => {
    const noisyPrefix = newPrefix();
    await ensureEventStream(bus.connection, { prefix: noisyPrefix });
    bus.publish(`${noisyPrefix}.events.bot.s1.Noise`, "not json");
    bus.publish(`${noisyPrefix}.events.bot.s1.Noise`, '{"no":"kind"}');
    await publishStored(noisyPrefix, [delta("s1", 1, "real")]);
    const stored = await collect(replayEvents(bus.connection, { prefix: noisyPrefix, since: { seq: 1 } }));
    expect(stored.map((item) => item.seq)).toEqual([3]);
  });

  it("reports each skipped record with its reason: not JSON, a bad common field, a malformed known kind", async () => {
    const noisyPrefix = newPrefix();
    await ensureEventStream(bus.connection, { prefix: noisyPrefix });
    const subject = `${noisyPrefix}.events.bot.s1.ModelTextDelta`;
    bus.publish(subject, "not json");
    bus.publish(subject, JSON.stringify({ ...delta("s1", 1, "x"), seq: "one" }));
    bus.publish(subject, JSON.stringify({ ...delta("s1", 2, "x"), delta: 42 }));
    await publishStored(noisyPrefix, [delta("s1", 3, "real")]);
    const skipped: Array<{ seq: number; subject: string; reason: string }> = [];
    const stored = await collect(
      replayEvents(bus.connection, {
        prefix: noisyPrefix,
        since: { seq: 1 },
        onSkipped: (record) => skipped.push(record),
      }),
    );
    expect(stored.map((item) => item.seq)).toEqual([4]);
    expect(skipped.map((record) => record.seq)).toEqual([1, 2, 3]);
    expect(skipped.every((record) => record.subject === subject)).toBe(true);
    expect(skipped[0]?.reason).toBe("not JSON");
    expect(skipped[1]?.reason).toMatch(/^seq: .*number/);
    expect(skipped[2]?.reason).toMatch(/^ModelTextDelta: delta: .*string/);
  });

  it("keeps an event of a kind newer than this version, marked as not known (forward compatibility)", async () => {
    const newerPrefix = newPrefix();
    await ensureEventStream(bus.connection, { prefix: newerPrefix });
    const newer = { ...delta("s1", 1, "x"), kind: "ModelThoughtSummary", summary: "thinking" };
    bus.publish(`${newerPrefix}.events.bot.s1.ModelThoughtSummary`, JSON.stringify(newer));
    await publishStored(newerPrefix, [delta("s1", 2, "real")]);
    const stored = await collect(replayEvents(bus.connection, { prefix: newerPrefix, since: { seq: 1 } }));
    expect(stored.map((item) => [item.isKnownKind, item.event.kind])).toEqual([
      [false, "ModelThoughtSummary"],
      [true, "ModelTextDelta"],
    ]);
    expect(stored[0]?.event).toEqual(newer);
  });

  it("stops with the abort reason when its signal aborts", async () => {
    const controller = new AbortController();
    const seen: number[] = [];
    const replay = (async () => {
      for await (const item of replayEvents(bus.connection, {
        prefix,
        since: { seq: 1 },
        signal: controller.signal,
      })) {
        seen.push(item.seq);
        if (item.seq === 2) controller.abort(new Error("tail stopped"));
      }
    })();
    await expect(replay).rejects.toThrow("tail stopped");
    expect(seen).toEqual([1, 2]);
  });

  it("ends with the last record of each subject, once, although the server still counts a deleted one (lastPerSubject)", async () => {
    // nats-server 2.9 keeps counting a subject whose last record was deleted as pending, yet does not
    // deliver it: a replay that waited for "nothing pending" read past its end (here the last record
    // again) or waited for ever.
    const deletedPrefix = newPrefix();
    await ensureEventStream(bus.connection, { prefix: deletedPrefix });
    const subjects = ["A", "B", "C"].map((kind) => `${deletedPrefix}.events.bot.s1.${kind}`);
    for (let index = 0; index < 9; index++) {
      bus.publish(subjects[index % 3] ?? "", JSON.stringify(delta("s1", index + 1, `d${index + 1}`)));
    }
    await publishStored(deletedPrefix, [delta("s2", 10, "other session")]);
    const manager = await jetstreamManager(bus.connection);
    // seq 8 is the last record on subject B.
    await manager.streams.deleteMessage(eventStreamName(deletedPrefix), 8, false);
    const stored = await collect(
      replayEvents(bus.connection, {
        prefix: deletedPrefix,
        filter: `${deletedPrefix}.events.bot.s1.>`,
        since: { lastPerSubject: true },
      }),
    );
    const seqs = stored.map((item) => item.seq);
    expect(seqs).toEqual(expect.arrayContaining([7, 9]));
    expect(seqs.filter((seq) => seq !== 5)).toEqual([7, 9]);
  });

  it("replays what was stored when it started: events stored during the replay are left for a live follower", async () => {
    const livePrefix = newPrefix();
    await ensureEventStream(bus.connection, { prefix: livePrefix });
    await publishStored(livePrefix, [delta("s1", 1, "a"), delta("s1", 2, "b"), delta("s1", 3, "c")]);
    const seen: number[] = [];
    for await (const item of replayEvents(bus.connection, { prefix: livePrefix, since: { seq: 1 } })) {
      seen.push(item.seq);
      if (item.seq === 1) await publishStored(livePrefix, [delta("s1", 4, "d"), delta("s1", 5, "e")]);
    }
    expect(seen).toEqual([1, 2, 3]);
    const rest = await collect(replayEvents(bus.connection, { prefix: livePrefix, since: { seq: 4 } }));
    expect(rest.map((item) => item.seq)).toEqual([4, 5]);
  });

  it("finds nothing to replay when the filter's last record is older than the start", async () => {
    const stored = await collect(
      replayEvents(bus.connection, { prefix, filter: `${prefix}.events.*.s1.>`, since: { seq: 6 } }),
    );
    expect(stored).toEqual([]);
    const fromTime = await collect(
      replayEvents(bus.connection, { prefix, since: { time: new Date(Date.now() + 60_000) } }),
    );
    expect(fromTime).toEqual([]);
  });

  it("lastStoredSeq: the last record a filter matches, or undefined when it matches none", async () => {
    await expect(lastStoredSeq(bus.connection, { prefix, filter: `${prefix}.events.*.s1.>` })).resolves.toBe(
      5,
    );
    await expect(lastStoredSeq(bus.connection, { prefix, filter: `${prefix}.events.>` })).resolves.toBe(6);
    await expect(
      lastStoredSeq(bus.connection, { prefix, filter: `${prefix}.events.*.nobody.>` }),
    ).resolves.toBeUndefined();
  });

  it("says so when the stream does not exist", async () => {
    const missing = replayEvents(bus.connection, { prefix: newPrefix(), since: { seq: 1 } });
    await expect(collect(missing)).rejects.toThrow(BusError);
  });

  it("refuses a bad start sequence", async () => {
    await expect(collect(replayEvents(bus.connection, { prefix, since: { seq: 0 } }))).rejects.toThrow(
      RangeError,
    );
  });
});
