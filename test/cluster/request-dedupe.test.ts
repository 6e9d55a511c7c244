import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Kvm } from "@nats-io/kv";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatReply } from "../../src/bus/contract.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { RequestDedupe, replyBucketName, replyKey } from "../../src/cluster/request-dedupe.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { countRequests } from "../support/counted-requests.js";
import {
  type NatsServer,
  startNatsServer,
  startRestartableNatsServer,
  workerNatsServer,
} from "../support/nats-server.js";

/**
 * The request-id dedupe across hosts, on a real JetStream KV bucket. Each test has its
 * own prefix (its own bucket); two RequestDedupe instances stand for two hosts.
 */

let server: NatsServer;
let bus: NatsBus;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "request-dedupe-test" });
});

afterAll(async () => {
  await bus.close();
  await server.stop();
});

const usage = { prompt: 1, completion: 1, total: 2, cached: 0 };
const answer = (result: string): ChatReply => ({ ok: true, session: "s1", result, usage, id: "r1" });

/** Hosts a and b, and `open` for another host on the same bucket (nothing of a or b in memory). */
async function hosts() {
  const prefix = uniqueRoot();
  const open = (hostId: string) => RequestDedupe.open(bus.connection, { prefix, hostId });
  const a = await open("a");
  const b = await open("b");
  /** Resolves once host a's `running` mark for r1 is in the bucket. */
  const marked = async () => {
    const kv = await new Kvm(bus.connection).open(replyBucketName(prefix));
    while ((await kv.get(replyKey("assistant", "s1", "r1"))) === null) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  };
  return { a, b, open, marked };
}

/** A deferred reply: the adopted chat's answer, given when the test says so. */
function deferred() {
  let resolve: (reply: ChatReply | undefined) => void = () => {};
  const promise = new Promise<ChatReply | undefined>((settle) => {
    resolve = settle;
  });
  return { promise, resolve };
}

describe("request dedupe across hosts", () => {
  it("a retry joins the chat a new owner adopted from the journal, and a later one gets its stored reply", async () => {
    const { a, b, open, marked } = await hosts();
    let runs = 0;
    const chat = async () => {
      runs++;
      return { reply: answer("second run") };
    };
    // Host a marks the run and dies before it answers (its chat never settles).
    void a.answer("assistant", "s1", "r1", () => new Promise(() => {}));
    await marked();
    const resumed = deferred();
    b.adopt("assistant", "s1", "r1", resumed.promise);
    const joined = b.answer("assistant", "s1", "r1", chat);
    resumed.resolve(answer("resumed"));
    expect(await joined).toEqual(answer("resumed"));
    expect(await b.answer("assistant", "s1", "r1", chat)).toEqual(answer("resumed"));
    // On any host, from the bucket.
    expect(await (await open("c")).answer("assistant", "s1", "r1", chat)).toEqual(answer("resumed"));
    expect(runs).toBe(0);
  });

  it("answers `cancelled` (never a second run) for a run that left nothing to resume", async () => {
    const { a, b, marked } = await hosts();
    void a.answer("assistant", "s1", "r1", () => new Promise(() => {}));
    await marked();
    // b resumed the session; the journal held nothing for r1: the adopted reply is undefined.
    b.adopt("assistant", "s1", "r1", Promise.resolve(undefined));
    let runs = 0;
    const reply = await b.answer("assistant", "s1", "r1", async () => {
      runs++;
      return { reply: answer("second run") };
    });
    expect(runs).toBe(0);
    expect(reply).toMatchObject({ ok: false, error: { code: "cancelled" } });
    expect(reply.ok ? "" : reply.error.message).toContain("started by host a");
  });

  it("keeps the successor's reply: the old owner's late answer does not overwrite it", async () => {
    const { a, b, open, marked } = await hosts();
    const late = deferred();
    const first = a.answer("assistant", "s1", "r1", async () => ({ reply: (await late.promise)! }));
    await marked();
    b.adopt("assistant", "s1", "r1", Promise.resolve(answer("resumed")));
    expect(await b.answer("assistant", "s1", "r1", async () => ({ reply: answer("x") }))).toEqual(
      answer("resumed"),
    );
    // The paused old owner comes back and answers its own (cut off) requester.
    late.resolve({ ok: false, error: { code: "cancelled", message: "this host lost the session" } });
    await first;
    const fresh = await open("c");
    expect(await fresh.answer("assistant", "s1", "r1", async () => ({ reply: answer("x") }))).toEqual(
      answer("resumed"),
    );
  });

  it("keeps a reply the dead host stored before its journal caught up", async () => {
    const { a, b } = await hosts();
    await a.answer("assistant", "s1", "r1", async () => ({ reply: answer("first") }));
    b.adopt("assistant", "s1", "r1", Promise.resolve(answer("from the history")));
    expect(await b.answer("assistant", "s1", "r1", async () => ({ reply: answer("x") }))).toEqual(
      answer("first"),
    );
  });

  it("stores the reply of a chat that ended while NATS restarted: a retry gets it, not `cancelled`", async () => {
    const restartable = await startRestartableNatsServer();
    const own = await NatsBus.connect({ url: restartable.url, name: "dedupe-restart" });
    try {
      const prefix = uniqueRoot();
      const dedupe = await RequestDedupe.open(own.connection, { prefix, hostId: "a" });
      // The chat ends while the server is down: its reply is stored once NATS is back.
      const first = await dedupe.answer("assistant", "s1", "r1", async () => {
        await restartable.kill();
        setTimeout(() => void restartable.restart(), 1_000);
        return { reply: answer("first") };
      });
      expect(first).toEqual(answer("first"));
      let runs = 0;
      const other = await RequestDedupe.open(own.connection, { prefix, hostId: "b" });
      const retried = await other.answer("assistant", "s1", "r1", async () => {
        runs++;
        return { reply: answer("second run") };
      });
      expect(retried).toEqual(answer("first"));
      expect(runs).toBe(0);
    } finally {
      await own.close();
      await restartable.kill();
    }
  });

  it("keeps a retry from running again when the reply is too large to store: `reply_too_large`", async () => {
    const config = join(await mkdtemp(join(tmpdir(), "agentloop-dedupe-")), "small.conf");
    await writeFile(config, "max_payload: 2048\n");
    const small = await startNatsServer({ isPrivate: true, args: ["-c", config] });
    const own = await NatsBus.connect({ url: small.url, name: "dedupe-small" });
    try {
      const prefix = uniqueRoot();
      const dedupe = await RequestDedupe.open(own.connection, { prefix, hostId: "a" });
      const big = answer("x".repeat(1_500));
      expect(await dedupe.answer("assistant", "s1", "r1", async () => ({ reply: big }))).toEqual(big);
      let runs = 0;
      const retried = await (await RequestDedupe.open(own.connection, { prefix, hostId: "b" })).answer(
        "assistant",
        "s1",
        "r1",
        async () => {
          runs++;
          return { reply: answer("second run") };
        },
      );
      expect(runs).toBe(0);
      expect(retried).toMatchObject({ ok: false, error: { code: "reply_too_large" } });
      expect(retried.ok ? "" : retried.error.message).toContain("was answered");
    } finally {
      await own.close();
      await small.stop();
    }
  });
});

describe("RequestDedupe's steps: begin, then finish", () => {
  it("marks a new id running with one write, and still reads the record of an id it has seen", async () => {
    const connection = await connect({ servers: server.url, name: "request-dedupe-count-test" });
    try {
      const requests = countRequests(connection);
      const prefix = uniqueRoot();
      const a = await RequestDedupe.open(connection, { prefix, hostId: "a" });
      const before = requests();
      const step = await a.begin("assistant", "s1", "r1");
      expect(requests() - before).toBe(1);
      if (!("run" in step)) throw new Error("a new id must be run");
      expect(step.run.revision).toBeGreaterThan(0);
      // Host b finds a's mark where it would write its own, and refuses the id as a reply.
      const b = await RequestDedupe.open(connection, { prefix, hostId: "b" });
      const refused = await b.begin("assistant", "s1", "r1");
      expect("reply" in refused && !refused.reply.ok && refused.reply.error.code).toBe("cancelled");
      // a's reply is stored over its own mark: b's next retry gets it.
      await a.finish(step.run, answer("first"));
      expect(await b.begin("assistant", "s1", "r1")).toEqual({ reply: answer("first") });
    } finally {
      await connection.close();
    }
  });

  it("hands out one run per id: a second begin waits for the first run's finish and gets its reply", async () => {
    const { a, b } = await hosts();
    const first = await a.begin("assistant", "s1", "r1");
    if (!("run" in first)) throw new Error("expected a run to do");
    let joinedReply: ChatReply | undefined;
    const joined = a.begin("assistant", "s1", "r1").then((step) => {
      joinedReply = "reply" in step ? step.reply : undefined;
      return step;
    });
    // Nothing for the joiner before the run is finished.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(joinedReply).toBeUndefined();
    await a.finish(first.run, answer("first"));
    expect(await joined).toEqual({ reply: answer("first") });
    // Stored: another host's begin gets the reply, not a run.
    expect(await b.begin("assistant", "s1", "r1")).toEqual({ reply: answer("first") });
  });

  it("leaves no record of a run finished with ran: false, so the next begin runs it", async () => {
    const { a, b } = await hosts();
    const first = await a.begin("assistant", "s1", "r1");
    if (!("run" in first)) throw new Error("expected a run to do");
    const refused: ChatReply = {
      ok: false,
      error: { code: "cancelled", message: "the host is shutting down" },
    };
    await a.finish(first.run, refused, { ran: false });
    const next = await b.begin("assistant", "s1", "r1");
    expect("run" in next).toBe(true);
    if ("run" in next) await b.finish(next.run, answer("second"));
    expect(await a.begin("assistant", "s1", "r1")).toEqual({ reply: answer("second") });
  });

  it("stores no `unavailable` of a chat cut off by a lost lease: the next owner's resumed chat answers the id", async () => {
    const { a, b, open } = await hosts();
    const cutOff: ChatReply = {
      ok: false,
      error: { code: "unavailable", message: "this host no longer owns shard 3: released" },
      id: "r1",
    };
    // Host a ran the chat and lost the shard mid-chat: its requester is told to retry.
    expect(await a.answer("assistant", "s1", "r1", async () => ({ reply: cutOff }))).toEqual(cutOff);
    // The next owner resumes it from the journal; the retry joins it instead of getting `unavailable`.
    const resumed = deferred();
    b.adopt("assistant", "s1", "r1", resumed.promise);
    const retry = b.answer("assistant", "s1", "r1", async () => ({ reply: answer("a second run") }));
    resumed.resolve(answer("resumed"));
    expect(await retry).toEqual(answer("resumed"));
    expect(await (await open("c")).begin("assistant", "s1", "r1")).toEqual({ reply: answer("resumed") });
  });

  it("a resumed chat cut off in turn answers its joined retries `unavailable` and leaves the id to the owner after", async () => {
    const { a, b } = await hosts();
    const cutOff: ChatReply = {
      ok: false,
      error: { code: "unavailable", message: "this host no longer owns shard 3: released" },
      id: "r1",
    };
    const firstResume = deferred();
    a.adopt("assistant", "s1", "r1", firstResume.promise);
    const joined = a.answer("assistant", "s1", "r1", async () => ({ reply: answer("a second run") }));
    firstResume.resolve(cutOff);
    expect(await joined).toEqual(cutOff);
    const secondResume = deferred();
    b.adopt("assistant", "s1", "r1", secondResume.promise);
    secondResume.resolve(answer("resumed on b"));
    expect(await b.answer("assistant", "s1", "r1", async () => ({ reply: answer("a second run") }))).toEqual(
      answer("resumed on b"),
    );
  });

  it("refuses, as a reply, a run another host marked running and never finished", async () => {
    const { a, b } = await hosts();
    const first = await a.begin("assistant", "s1", "r1");
    expect("run" in first).toBe(true);
    const step = await b.begin("assistant", "s1", "r1");
    expect(step).toMatchObject({ reply: { ok: false, error: { code: "cancelled" } } });
  });

  it("answer() still answers a joined retry when its chat throws: `internal`, and a later retry may run", async () => {
    const { a } = await hosts();
    let release = () => {};
    // The chat is running once its callback is called (after the running mark is stored).
    let markRunning = () => {};
    const running = new Promise<void>((resolve) => {
      markRunning = resolve;
    });
    const failing = a.answer(
      "assistant",
      "s1",
      "r1",
      () =>
        new Promise<never>((_resolve, reject) => {
          release = () => reject(new Error("the session broke"));
          markRunning();
        }),
    );
    await running;
    const joined = a.answer("assistant", "s1", "r1", async () => ({ reply: answer("never") }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    await expect(failing).rejects.toThrow("the session broke");
    expect(await joined).toMatchObject({ ok: false, error: { code: "internal" } });
    expect(await a.answer("assistant", "s1", "r1", async () => ({ reply: answer("ran") }))).toEqual(
      answer("ran"),
    );
  });
});
