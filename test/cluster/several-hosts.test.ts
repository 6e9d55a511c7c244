import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { parseChatReply } from "../../src/bus/contract.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { hostSubject } from "../../src/cluster/session-cluster.js";
import {
  DEFAULT_LEASE_TTL_MS,
  isLeaseFree,
  leaseTiming,
  SessionLeaseStore,
} from "../../src/cluster/session-lease.js";
import { shardsBucketName } from "../../src/cluster/shard-keeper.js";
import { SqliteContextHistory } from "../../src/context/sqlite-context-history.js";
import type { Message } from "../../src/llm/types.js";
import type { RecordedRequest } from "../../src/testing/fake-http-server.js";
import { type FakeProvider, type FakeProviderReply, startFakeProvider } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import {
  killServeProcesses,
  type ServeProcess,
  startServeProcess,
  waitForHost,
} from "../host/running-serve.js";
import { runBinary, runCli, waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { sessionPreferring, untilShardsBalanced } from "../support/preferred-session.js";

/**
 * Black-box: several `agentloop serve` processes (dist/) on one nats-server share the
 * agents, each session leased to one of them. The fake provider's log shows what ran where.
 */

let server: NatsServer;
let bus: NatsBus;
let directory: string;
const providers: FakeProvider[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "several-hosts-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-cluster-"));
});

afterEach(() => killServeProcesses());

afterAll(async () => {
  await Promise.all(providers.splice(0).map((provider) => provider.close()));
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

/** One model request as the provider saw it: which session (from the user text), and when. */
interface ModelCall {
  session: string;
  conversation: string[];
  startedAt: number;
  endedAt: number;
}

/**
 * A provider that answers `reply to <last user text>` after `thinkMs` (longer for texts in
 * `slow`), logging each call; the user texts start with their session's name (`s3 #7`).
 */
async function loggingProvider(options: { thinkMs?: number; slow?: Map<string, Promise<unknown>> } = {}) {
  const calls: ModelCall[] = [];
  const script = async (request: RecordedRequest): Promise<FakeProviderReply> => {
    const conversation = conversationOf(request);
    const last = conversation.at(-1) ?? "";
    const call: ModelCall = {
      session: last.replace(/^user: (\S+) .*$/s, "$1"),
      conversation,
      startedAt: performance.now(),
      endedAt: Number.POSITIVE_INFINITY,
    };
    calls.push(call);
    await (options.slow?.get(last.slice("user: ".length)) ??
      new Promise((resolve) => setTimeout(resolve, options.thinkMs ?? 30)));
    call.endedAt = performance.now();
    return { text: `reply to ${last.slice("user: ".length)}` };
  };
  const provider = await startFakeProvider("openai-chat", { script });
  providers.push(provider);
  return { provider, calls };
}

/** `role: text` of each non-system message of an OpenAI chat request. */
function conversationOf(request: RecordedRequest): string[] {
  const messages = (request.body as { messages?: Array<{ role: string; content: unknown }> }).messages ?? [];
  return messages
    .filter((message) => message.role !== "system")
    .map(
      (message) =>
        `${message.role}: ${typeof message.content === "string" ? message.content : JSON.stringify(message.content)}`,
    );
}

function startHost(
  hostId: string,
  prefix: string,
  db: string,
  provider: FakeProvider,
  // The default lease time: a 2 s lease can lapse on a loaded machine (a host stalled past it
  // drops the session, as it must), so only a test of expiry shortens it.
  ttl = "10s",
): ServeProcess {
  return startServeProcess(
    ["--nats", server.url, "--prefix", prefix, "--db", db, "--host-id", hostId, "--lease-ttl", ttl],
    provider.env,
  );
}

async function chat(subject: string, session: string, text: string, id?: string) {
  const reply = await bus.request(
    subject,
    JSON.stringify({ session, text, ...(id === undefined ? {} : { id }) }),
    { timeoutMs: 60_000 },
  );
  const parsed = parseChatReply(reply.data);
  if (!parsed.ok) throw new Error(parsed.error.message);
  return parsed.value;
}

/**
 * Resolves once `host` (on the default lease time) may take over `owner`'s host lease, and with it
 * its shards: the owner's expiry plus the taker's skew margin, read from the shard bucket.
 */
async function untilHostLeaseFree(prefix: string, owner: string, host: string): Promise<void> {
  const store = await SessionLeaseStore.open(bus.connection, { bucket: shardsBucketName(prefix) });
  const timing = leaseTiming(DEFAULT_LEASE_TTL_MS);
  const deadline = Date.now() + 60_000;
  for (;;) {
    const stored = await store.read("host", owner);
    if (stored !== undefined && isLeaseFree(stored.record, host, Date.now(), timing)) return;
    if (Date.now() > deadline) throw new Error(`the lease of host ${owner} never became free for ${host}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function historyOf(db: string, session: string): Promise<Message[]> {
  const history = new SqliteContextHistory({ path: db, agent: "assistant", session });
  return history.restore().finally(() => history.close?.());
}

function texts(messages: readonly Message[]): string[] {
  return messages.map(
    (message) =>
      `${message.role}: ${typeof message.content === "string" ? message.content : JSON.stringify(message.content)}`,
  );
}

describe("several hosts on one NATS system", () => {
  it.each([2, 3])(
    "%i hosts, 200 chats over 20 sessions: each session on one host at a time, no overlapping model requests, one linear history per session",
    { timeout: 180_000 },
    async (hostCount) => {
      const prefix = uniqueRoot();
      const db = join(directory, `linear-${hostCount}.db`);
      const { provider, calls } = await loggingProvider();
      const ids = Array.from({ length: hostCount }, (_, index) => `h${index + 1}`);
      const hosts = ids.map((id) => startHost(id, prefix, db, provider));
      for (const [index, id] of ids.entries()) await waitForHost(bus, prefix, id, hosts[index]!);
      await untilShardsBalanced(bus, prefix, ids);
      const sessions = Array.from({ length: 20 }, (_, index) => `s${index}`);
      // First messages straight to a host, so each owns sessions; the rest through the queue group.
      await Promise.all(
        sessions.map((session, index) =>
          chat(
            `${hostSubject(prefix, ids[index % hostCount]!)}.agents.assistant.chat`,
            session,
            `${session} #0`,
          ),
        ),
      );
      const perSession = 10;
      const replies = await Promise.all(
        sessions.flatMap((session) =>
          Array.from({ length: perSession - 1 }, (_, index) =>
            chat(chatSubject(prefix, "assistant"), session, `${session} #${index + 1}`),
          ),
        ),
      );
      expect(replies.filter((reply) => !reply.ok)).toEqual([]);

      const listing = await runCli(["sessions", "--nats", server.url, "--prefix", prefix, "--json"]);
      expect(listing.code).toBe(0);
      const owners = listing.stdout
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { session: string; host: string; epoch: number });
      expect(owners.map((owner) => owner.session).sort()).toEqual([...sessions].sort());
      expect(new Set(owners.map((owner) => owner.host))).toEqual(new Set(ids));

      for (const session of sessions) {
        const ofSession = calls.filter((call) => call.session === session);
        expect(ofSession).toHaveLength(perSession);
        // Never two model requests of one session at once.
        const byStart = [...ofSession].sort((a, b) => a.startedAt - b.startedAt);
        for (let index = 1; index < byStart.length; index++) {
          expect(byStart[index]!.startedAt).toBeGreaterThanOrEqual(byStart[index - 1]!.endedAt);
        }
        // Each request carries the whole conversation so far, and the history is that conversation.
        const history = texts(await historyOf(db, session));
        expect(history).toHaveLength(perSession * 2);
        byStart.forEach((call, index) => {
          expect(call.conversation).toEqual(history.slice(0, index * 2 + 1));
          expect(history[index * 2 + 1]).toBe(`assistant: reply to ${call.conversation.at(-1)!.slice(6)}`);
        });
      }
      for (const host of hosts) host.child.kill("SIGTERM");
      for (const host of hosts) expect((await host.run).code).toBe(0);
    },
  );

  it(
    "answer a chat id once: a retry joins the running chat, a later one gets the stored reply",
    { timeout: 120_000 },
    async () => {
      const prefix = uniqueRoot();
      const db = join(directory, "dedupe.db");
      let finish = () => {};
      const slow = new Map([
        [
          "d1 once",
          new Promise<void>((resolve) => {
            finish = resolve;
          }),
        ],
      ]);
      const { calls, provider } = await loggingProvider({ slow });
      const hosts = [startHost("h1", prefix, db, provider), startHost("h2", prefix, db, provider)];
      await waitForHost(bus, prefix, "h1", hosts[0]!);
      await waitForHost(bus, prefix, "h2", hosts[1]!);
      // A hand-over of d1's shard while its first chat runs would hold the retries until it ends.
      await untilShardsBalanced(bus, prefix, ["h1", "h2"]);
      const subject = chatSubject(prefix, "assistant");
      const first = chat(subject, "d1", "d1 once", "req-1");
      await waitFor(() => calls.length === 1, 60_000);
      // Sent while the first runs, through the queue group (either host): they join it.
      const retries = [chat(subject, "d1", "d1 once", "req-1"), chat(subject, "d1", "d1 once", "req-1")];
      // Let the retries reach a host before the first chat ends.
      await new Promise((resolve) => setTimeout(resolve, 300));
      finish();
      const answers = await Promise.all([first, ...retries]);
      const later = await chat(subject, "d1", "d1 once", "req-1");
      for (const answer of [...answers, later]) {
        expect(answer).toMatchObject({ ok: true, result: "reply to d1 once", id: "req-1" });
      }
      expect(calls).toHaveLength(1);
      expect(texts(await historyOf(db, "d1"))).toEqual(["user: d1 once", "assistant: reply to d1 once"]);
      for (const host of hosts) host.child.kill("SIGTERM");
      await Promise.all(hosts.map((host) => host.run));
    },
  );

  it(
    "take a paused host's session once its lease expires; resumed, the paused host writes nothing to it",
    { timeout: 120_000 },
    async () => {
      const prefix = uniqueRoot();
      const db = join(directory, "paused.db");
      // A session whose shard h1 owns once the two hosts balanced the shards.
      const p1 = sessionPreferring("h1", ["h1", "h2"], { stem: "p1" });
      let answerFirst = () => {};
      const slow = new Map([
        [
          `${p1} first`,
          new Promise<void>((resolve) => {
            answerFirst = resolve;
          }),
        ],
      ]);
      const { calls, provider } = await loggingProvider({ slow });
      // h1's lease is to run out while it is paused: shorter, but not so short that it lapses
      // before the pause on a loaded machine.
      const h1 = startHost("h1", prefix, db, provider, "5s");
      // Every host of a system runs on the same lease time (shards are placed by it).
      const h2 = startHost("h2", prefix, db, provider, "5s");
      await waitForHost(bus, prefix, "h1", h1);
      await waitForHost(bus, prefix, "h2", h2);
      await untilShardsBalanced(bus, prefix, ["h1", "h2"]);

      // h1 takes p1 and asks the model, which holds its answer.
      const stranded = bus
        .request(
          `${hostSubject(prefix, "h1")}.agents.assistant.chat`,
          JSON.stringify({ session: p1, text: `${p1} first` }),
          {
            timeoutMs: 60_000,
          },
        )
        .then(
          (reply) => reply.data,
          (error: unknown) => String(error),
        );
      await waitFor(() => calls.length === 1, 60_000);
      h1.child.kill("SIGSTOP");
      try {
        // The model answers while h1 is paused; h1's lease runs out.
        answerFirst();
        await untilHostLeaseFree(prefix, "h1", "h2");
        const taken = await chat(`${hostSubject(prefix, "h2")}.agents.assistant.chat`, p1, `${p1} second`);
        expect(taken).toMatchObject({ ok: true, result: `reply to ${p1} second` });
        const listing = await runBinary(["sessions", "--nats", server.url, "--prefix", prefix, "--json"]);
        // The epoch is the shard lease's: one more than h1's, whoever held the shard before.
        const listed = JSON.parse(listing.stdout.trim()) as { session: string; host: string; epoch: number };
        expect(listed).toMatchObject({ session: p1, host: "h2" });
        expect(listed.epoch).toBeGreaterThanOrEqual(2);
      } finally {
        h1.child.kill("SIGCONT");
      }
      // Resumed, h1 finds its lease gone: it stops the session and writes none of the first answer.
      // One line names the sessions the lost shards stopped (all of them, when the host lease lapsed).
      await waitFor(
        () =>
          h1
            .stderr()
            .split("\n")
            .some((line) => line.includes("stopped here") && line.includes(`assistant/${p1}`)),
        60_000,
      );
      const strandedReply = await stranded;
      expect(strandedReply).not.toContain('"ok":true');
      // h2, the next owner, resumed the unfinished first chat from the journal (a new model
      // request) before the second: the paused h1's answer to it was never written.
      expect(texts(await historyOf(db, p1))).toEqual([
        `user: ${p1} first`,
        `assistant: reply to ${p1} first`,
        `user: ${p1} second`,
        `assistant: reply to ${p1} second`,
      ]);
      expect(calls.map((call) => call.session)).toEqual([p1, p1, p1]);
      for (const host of [h1, h2]) host.child.kill("SIGTERM");
      await Promise.all([h1.run, h2.run]);
    },
  );
});
