import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInbox } from "@nats-io/transport-node";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Subscription } from "../../src/bus/bus.js";
import { type ChatReply, parseChatReply } from "../../src/bus/contract.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import type { SessionHeartbeat } from "../../src/bus/session-heartbeat.js";
import { chatSubject, sessionHeartbeatSubject } from "../../src/bus/subjects.js";
import { hostSubject } from "../../src/cluster/session-cluster.js";
import { NatsHistoryStore } from "../../src/context/nats-history-store.js";
import { KvChatJournal } from "../../src/journal/kv-chat-journal.js";
import { INTERRUPTED_TOOL_RESULT } from "../../src/journal/resume-plan.js";
import type { Message } from "../../src/llm/types.js";
import {
  chatTurnSse,
  type FakeProvider,
  type FakeProviderReply,
  stallAfterFrames,
  startFakeProvider,
} from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import {
  killServeProcesses,
  type ServeProcess,
  startServeProcess,
  untilNoResponders,
  waitForHost,
} from "../host/running-serve.js";
import { danglingToolCalls } from "../support/agent-harness.js";
import { waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { sessionPreferring, untilShardsBalanced } from "../support/preferred-session.js";

/**
 * Black-box: a chat request with an `id` is answered once per id across a failover. Two
 * `serve` processes (dist/) share one nats-server with `--history nats` and the default 10 s lease
 * (a 2 s one lapsed on a loaded machine before the kill, and the test timed out); the
 * session's owner is killed with SIGKILL mid-stream or mid-tool; the client retries the same id
 * on the other host. The retry joins the chat the new owner resumed from the journal (exactly one
 * reply, the resumed chat's), a later retry gets the stored reply, nothing runs twice.
 */

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let agentsFile: string;
const providers: FakeProvider[] = [];
const subscriptions: Subscription[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "failover-retry-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-failover-"));
  agentsFile = join(directory, "agents.json");
  await writeFile(agentsFile, JSON.stringify({ agents: [{ name: "assistant", tools: ["shell"] }] }));
});

afterEach(() => {
  killServeProcesses();
  for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
});

afterAll(async () => {
  await Promise.all(providers.splice(0).map((provider) => provider.close()));
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

async function provider(script: (index: number) => FakeProviderReply): Promise<FakeProvider> {
  const started = await startFakeProvider("openai-chat", { script: (_request, index) => script(index) });
  providers.push(started);
  return started;
}

function startHost(hostId: string, prefix: string, model: FakeProvider): ServeProcess {
  return startServeProcess(
    [
      ...["--nats", server.url, "--prefix", prefix, "--agents", agentsFile],
      ...["--history", "nats", "--lease-ttl", "10s", "--host-id", hostId],
    ],
    model.env,
    300_000,
  );
}

/** A request whose every reply is kept (a second reply to one request would show here). */
interface Asked {
  replies: ChatReply[];
  first: Promise<ChatReply>;
}

function ask(subject: string, body: Record<string, unknown>): Asked {
  const inbox = createInbox();
  const replies: ChatReply[] = [];
  let answered: (reply: ChatReply) => void = () => {};
  const first = new Promise<ChatReply>((resolve) => {
    answered = resolve;
  });
  subscriptions.push(
    bus.subscribe(inbox, (message) => {
      const parsed = parseChatReply(message.data);
      const reply: ChatReply = parsed.ok ? parsed.value : parsed;
      replies.push(reply);
      answered(reply);
    }),
  );
  bus.connection.publish(subject, JSON.stringify(body), { reply: inbox });
  return { replies, first };
}

async function historyOf(prefix: string, session: string): Promise<Message[]> {
  const store = await NatsHistoryStore.open(bus.connection, { prefix });
  return store.history("assistant", session).restore();
}

/** The hosts that beat for the session while it had a request in hand. */
function beatingHosts(prefix: string, session: string): Set<string> {
  const hosts = new Set<string>();
  subscriptions.push(
    bus.subscribe(sessionHeartbeatSubject(prefix, "assistant", session), (message) => {
      hosts.add((JSON.parse(message.data) as SessionHeartbeat).host);
    }),
  );
  return hosts;
}

function readCounter(path: string): number {
  try {
    return readFileSync(path, "utf8")
      .split("\n")
      .filter((line) => line === "ran").length;
  } catch {
    return 0;
  }
}

/** The client ids of the chats queued in the session's journal entry (the KV bucket). */
async function queuedRequestIds(prefix: string, session: string): Promise<Array<string | undefined>> {
  const bucket = `${prefix.toUpperCase().replace(/[^A-Z0-9_-]/g, "_")}_JOURNAL`;
  const journal = await KvChatJournal.open(bus.connection, { bucket });
  return (await journal.load("assistant", session))?.queued.map((queued) => queued.requestId) ?? [];
}

async function until(
  condition: () => Promise<boolean>,
  describeState: () => string = () => "",
  timeoutMs = 30_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for a condition ${describeState()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The first replies of `asked`; a reply that has not come within `timeoutMs` fails the test with
 * what the surviving host printed, instead of leaving it to the test's own timeout with nothing said.
 */
async function firstReplies(asked: Asked[], host: ServeProcess, timeoutMs = 120_000): Promise<ChatReply[]> {
  let timer: NodeJS.Timeout | undefined;
  const silent = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const got = asked.map((one) => one.replies.length);
      reject(
        new Error(`no reply within ${timeoutMs / 1000} s (replies: ${got}); host output:\n${host.stderr()}`),
      );
    }, timeoutMs);
  });
  try {
    return await Promise.race([Promise.all(asked.map((one) => one.first)), silent]);
  } finally {
    clearTimeout(timer);
  }
}

/** Long enough for a second reply to a request, if one were sent, to arrive. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 500));

describe("retrying a chat id after its host was killed", () => {
  it(
    "mid-stream: the retry on the other host joins the resumed chat; a later retry gets the stored reply",
    { timeout: 240_000 },
    async () => {
      const prefix = uniqueRoot();
      const model = await provider((index) =>
        index === 0
          ? stallAfterFrames(chatTurnSse({ text: ["The full", " answer."] }), 2)
          : { text: "The full answer." },
      );
      const h1 = startHost("h1", prefix, model);
      const h2 = startHost("h2", prefix, model);
      await waitForHost(bus, prefix, "h1", h1);
      await waitForHost(bus, prefix, "h2", h2);
      // Sent before the hosts balanced, a request could land in a hand-over of its session's shard
      // (answered `unavailable` while the running chat holds the drain): this case is a kill.
      await untilShardsBalanced(bus, prefix, ["h1", "h2"]);
      // A session whose shard h1 owns (once the two hosts balanced the shards).
      const s1 = sessionPreferring("h1", ["h1", "h2"]);
      const beats = beatingHosts(prefix, s1);
      await bus.flush();

      const request = { session: s1, text: "tell me", id: "req-stream" };
      const lost = ask(`${hostSubject(prefix, "h1")}.agents.assistant.chat`, request);
      await waitFor(() => model.requests.length === 1, 60_000);
      h1.child.kill("SIGKILL");
      await h1.run;

      const retried = ask(`${hostSubject(prefix, "h2")}.agents.assistant.chat`, request);
      const [reply] = await firstReplies([retried], h2);
      expect(reply).toMatchObject({ ok: true, session: s1, result: "The full answer.", id: "req-stream" });
      // h2 beat for the session while the retry waited for the lease and the resumed chat.
      expect(beats.has("h2")).toBe(true);

      const later = ask(chatSubject(prefix, "assistant"), request);
      expect(await later.first).toEqual(reply);
      await settle();
      expect(lost.replies).toEqual([]);
      expect(retried.replies).toHaveLength(1);
      expect(later.replies).toHaveLength(1);
      // The stalled request, then the resumed chat's: the retries ran nothing.
      expect(model.requests).toHaveLength(2);
      expect(await historyOf(prefix, s1)).toEqual([
        { role: "user", content: "tell me" },
        { role: "assistant", content: "The full answer." },
      ]);
      h2.child.kill("SIGTERM");
      expect((await h2.run).code).toBe(0);
    },
  );

  it(
    "mid-tool: the tool is not run again, the running and the queued chat each answer their id once",
    { timeout: 240_000 },
    async () => {
      const prefix = uniqueRoot();
      const counter = join(directory, `counter-${prefix}`);
      const command = `echo ran >> ${JSON.stringify(counter)} && sleep 60`;
      const answers = ["The charge may or may not have gone through.", "You are welcome."];
      const model = await provider((index) =>
        index === 0
          ? { toolCalls: [{ id: "call_1", name: "shell", arguments: JSON.stringify({ command }) }] }
          : { text: answers[index - 1] ?? "unexpected" },
      );
      const h1 = startHost("h1", prefix, model);
      const h2 = startHost("h2", prefix, model);
      await waitForHost(bus, prefix, "h1", h1);
      await waitForHost(bus, prefix, "h2", h2);
      // Sent before the hosts balanced, a request could land in a hand-over of its session's shard
      // (answered `unavailable` while the running chat holds the drain): this case is a kill.
      await untilShardsBalanced(bus, prefix, ["h1", "h2"]);
      await bus.flush();

      const s1 = sessionPreferring("h1", ["h1", "h2"]);
      const charge = { session: s1, text: "charge the card", id: "req-charge" };
      const thanks = { session: s1, text: "thanks", id: "req-thanks" };
      const h1Subject = `${hostSubject(prefix, "h1")}.agents.assistant.chat`;
      const lost = [ask(h1Subject, charge)];
      await waitFor(() => readCounter(counter) === 1, 60_000);
      // Queued behind the running chat on h1 (and journaled there) before h1 dies.
      lost.push(ask(h1Subject, thanks));
      await until(
        async () => (await queuedRequestIds(prefix, s1)).length === 1,
        () => `replies so far: ${JSON.stringify(lost.map((asked) => asked.replies))}`,
      );
      // The queued chat's journal entry carries its client id.
      expect(await queuedRequestIds(prefix, s1)).toEqual(["req-thanks"]);
      h1.child.kill("SIGKILL");
      await h1.run;
      // The retry of `thanks` goes to the queue group: sent before the server dropped h1's
      // subscriptions, it could be handed to the dead process and never answered.
      await untilNoResponders(bus, h1Subject);

      const h2Subject = `${hostSubject(prefix, "h2")}.agents.assistant.chat`;
      const retries = [ask(h2Subject, charge), ask(chatSubject(prefix, "assistant"), thanks)];
      const [charged, thanked] = await firstReplies(retries, h2);
      expect(charged).toMatchObject({ ok: true, result: answers[0], id: "req-charge" });
      expect(thanked).toMatchObject({ ok: true, result: answers[1], id: "req-thanks" });

      const later = [ask(chatSubject(prefix, "assistant"), charge), ask(h2Subject, thanks)];
      expect(await later[0]!.first).toEqual(charged);
      expect(await later[1]!.first).toEqual(thanked);
      await settle();
      for (const asked of lost) expect(asked.replies).toEqual([]);
      for (const asked of [...retries, ...later]) expect(asked.replies).toHaveLength(1);

      expect(readCounter(counter)).toBe(1);
      expect(model.requests).toHaveLength(3);
      const history = await historyOf(prefix, s1);
      expect(danglingToolCalls(history)).toEqual([]);
      expect(history.map((message) => message.role)).toEqual([
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
      ]);
      expect(history[2]).toMatchObject({ toolCallId: "call_1", content: INTERRUPTED_TOOL_RESULT });
      expect(history.filter((message) => message.role === "user").map((message) => message.content)).toEqual([
        "charge the card",
        "thanks",
      ]);
      h2.child.kill("SIGTERM");
      expect((await h2.run).code).toBe(0);
    },
  );
});
