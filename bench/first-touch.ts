import { loadavg } from "node:os";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import pLimit from "p-limit";
import { createAgent } from "../src/agent/create-agent.js";
import { NatsHistoryStore } from "../src/context/nats-history-store.js";
import { KvChatJournal } from "../src/journal/kv-chat-journal.js";
import type { Message } from "../src/llm/types.js";
import { scriptedModel } from "../src/testing/scripted-model.js";
import { nowMs } from "./support/clock.js";
import { startNatsServer } from "./support/nats-server.js";
import { percentile } from "./support/stats.js";

/**
 * The first touch of a session after failover, under `--history nats`: the new owner builds each
 * session from JetStream (its history, event seq mark, parked approval and journal). Seeds a
 * private nats-server with `--stored` sessions (what the stream holds besides), and `--sessions`
 * sessions each with a compacted history plus appends, a seq mark and a journal of an unfinished
 * chat; then opens the latter all at once, as the sample of a failover does, and reports the total
 * and p50/p99 of one open, with the load average (the machine is shared).
 *
 * `node dist/bench/first-touch.js [--sessions 200] [--stored 3000] [--rounds 3]`
 */
const AGENT = "bench";
const WRITE_CONCURRENCY = 32;

interface Args {
  sessions: number;
  stored: number;
  rounds: number;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = { sessions: 200, stored: 3000, rounds: 3 };
  for (let index = 0; index < argv.length; index += 2) {
    const name = argv[index]?.replace(/^--/, "");
    const value = Number(argv[index + 1]);
    if (
      (name !== "sessions" && name !== "stored" && name !== "rounds") ||
      !Number.isSafeInteger(value) ||
      value < 1
    )
      throw new Error(`usage: first-touch [--sessions N] [--stored N] [--rounds N] (got ${argv.join(" ")})`);
    args[name] = value;
  }
  return args;
}

function turn(index: number): Message[] {
  return [
    { role: "user", content: `Question ${index}: what about alpha, beta and gamma? `.repeat(4) },
    { role: "assistant", content: `Answer ${index}: here is what I found. `.repeat(8) },
  ];
}

/** One session as a host leaves it: a snapshot and two chats after it, a seq mark, and (`isBusy`) a chat cut off mid-way. */
async function seed(store: NatsHistoryStore, journal: KvChatJournal, session: string, isBusy: boolean) {
  const history = store.history(AGENT, session);
  await history.restore();
  await history.replace(turn(0));
  await history.append(turn(1));
  await history.append(turn(2));
  await history.saveSeq(12);
  if (!isBusy) return;
  const chat = {
    chatId: `c-${session}`,
    userText: "go on",
    chatStart: 6,
    iteration: 0,
    messages: [],
    inFlight: null,
  };
  await journal.append(AGENT, session, { n: 1, id: `${session}-1`, steps: [{ kind: "chat", chat }] });
  await journal.append(AGENT, session, {
    n: 2,
    id: `${session}-2`,
    steps: [{ kind: "message", message: { role: "user", content: "go on" } }],
  });
}

async function openAll(connection: NatsConnection, sessions: readonly string[]) {
  const store = await NatsHistoryStore.open(connection);
  const journal = await KvChatJournal.open(connection);
  const durations: number[] = [];
  const start = nowMs();
  await Promise.all(
    sessions.map(async (session) => {
      const opened = nowMs();
      const agent = await createAgent({
        name: AGENT,
        session,
        llm: scriptedModel([]),
        model: "bench",
        history: store.history(AGENT, session),
        journal,
      });
      durations.push(nowMs() - opened);
      if (agent.journal?.unfinishedChat === null)
        throw new Error(`${session}: its journal was not read back`);
    }),
  );
  const total = nowMs() - start;
  durations.sort((a, b) => a - b);
  return { total, p50: percentile(durations, 50), p99: percentile(durations, 99) };
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const server = await startNatsServer();
  const connection = await connect({ servers: server.url, name: "bench-first-touch" });
  try {
    const store = await NatsHistoryStore.open(connection);
    const journal = await KvChatJournal.open(connection);
    const limit = pLimit(WRITE_CONCURRENCY);
    const seeding = nowMs();
    await Promise.all(
      Array.from({ length: args.stored }, (_, index) =>
        limit(() => seed(store, journal, `other${index}`, index % 10 === 0)),
      ),
    );
    const sampled = Array.from({ length: args.sessions }, (_, index) => `touched${index}`);
    await Promise.all(sampled.map((session) => limit(() => seed(store, journal, session, true))));
    console.log(
      `seeded ${args.stored} + ${args.sessions} sessions in ${((nowMs() - seeding) / 1000).toFixed(1)} s`,
    );
    for (let round = 1; round <= args.rounds; round++) {
      // A fresh connection per round: a new owner has nothing of these sessions cached.
      const fresh = await connect({ servers: server.url, name: `bench-first-touch-${round}` });
      try {
        const { total, p50, p99 } = await openAll(fresh, sampled);
        const [load1] = loadavg();
        console.log(
          `round ${round}: ${args.sessions} sessions opened at once in ${total.toFixed(0)} ms; one open p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms (load average ${load1?.toFixed(2)})`,
        );
      } finally {
        await fresh.close();
      }
    }
  } finally {
    await connection.close();
    await server.stop();
  }
}

await main();
