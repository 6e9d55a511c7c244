/**
 * What a host's session mailbox costs per chat: bytes allocated (V8's sampling heap profiler,
 * garbage included: a figure that does not move with the machine's load) and CPU time, for a chat
 * that finds its session without a mailbox (it lingered out: a session chatting less often than
 * once a second), through `SessionActor` in front of an agent that answers at once. With
 * `--against DIR` it also runs another checkout's build of `SessionActor` (its `dist/`) in the same
 * process, the CPU rounds alternating: a before/after that shares the machine's load.
 *
 * `node dist/bench/scale/mailbox-cost.js [--against /path/to/other/checkout] [--chats N]`
 */
import { Session } from "node:inspector/promises";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Agent } from "../../src/agent/agent-types.js";

type SessionActorClass = typeof import("../../src/host/session-actor.js").SessionActor;

function parseArgs(argv: readonly string[]): { against: string | undefined; chats: number } {
  let against: string | undefined;
  let chats = 2_000;
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index];
    const value = argv[++index];
    if (arg === "--against" && value !== undefined) against = resolve(value);
    else if (arg === "--chats" && Number(value) > 0) chats = Number(value);
    else throw new Error("usage: mailbox-cost [--against DIR] [--chats N]");
  }
  return { against, chats };
}

/** An agent that answers every chat at once, and whose reports go nowhere. */
function quickAgent(session: string): Agent {
  const usage = { prompt: 1, completion: 1, total: 2, cached: 0 };
  return {
    name: "bot",
    session,
    tokenUsed: 0,
    contextRatio: 0,
    messages: [],
    memoryBytes: 0,
    chat: async () => ({ result: "ok", usage }),
    compact: async () => true,
    reset: async () => {},
    report: () => {},
  };
}

const pause = (ms: number) => new Promise<void>((done) => setTimeout(done, ms));

/** `chats` chats over 100 sessions, each finding its session's mailbox gone (linger 0, waited out). */
async function runChats(SessionActor: SessionActorClass, chats: number): Promise<void> {
  const actors = Array.from(
    { length: 100 },
    (_, index) => new SessionActor({ agent: quickAgent(`s${index}`), mailboxLingerMs: 0 }),
  );
  for (let chat = 0; chat < chats; chat++) {
    const outcome = await actors[chat % actors.length]!.chat({ text: "hello" });
    if (!outcome.ok) throw new Error(`a chat failed: ${outcome.error.message}`);
    // The mailbox is dropped by a timer: let it fire before the next round of sessions.
    if (chat % actors.length === actors.length - 1) await pause(2);
  }
}

async function bytesPerChat(SessionActor: SessionActorClass, chats: number): Promise<number> {
  const session = new Session();
  session.connect();
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 1_024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await runChats(SessionActor, chats);
  const { profile } = await session.post("HeapProfiler.stopSampling");
  session.disconnect();
  let total = 0;
  const walk = (node: { selfSize: number; children: unknown[] }): void => {
    total += node.selfSize;
    for (const child of node.children) walk(child as typeof node);
  };
  walk(profile.head as unknown as { selfSize: number; children: unknown[] });
  return total / chats;
}

async function cpuUsPerChat(SessionActor: SessionActorClass, chats: number): Promise<number> {
  const before = process.cpuUsage();
  await runChats(SessionActor, chats);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / chats;
}

async function load(root: string): Promise<SessionActorClass> {
  const module = (await import(pathToFileURL(`${root}/dist/src/host/session-actor.js`).href)) as {
    SessionActor: SessionActorClass;
  };
  return module.SessionActor;
}

const { against, chats } = parseArgs(process.argv.slice(2));
const here = fileURLToPath(new URL("../../..", import.meta.url));
const builds: [string, string][] = [["this build", here]];
if (against !== undefined) builds.push(["--against", against]);
const loaded = await Promise.all(builds.map(async ([name, root]) => [name, await load(root)] as const));
for (const [, SessionActor] of loaded) await runChats(SessionActor, 500);
for (const [name, SessionActor] of loaded) {
  const bytes = await bytesPerChat(SessionActor, chats);
  console.log(`${name}: ${(bytes / 1024).toFixed(2)} KB allocated per chat`);
}
const cpu = new Map<string, number[]>(loaded.map(([name]) => [name, []]));
for (let round = 0; round < 10; round++) {
  for (const [name, SessionActor] of round % 2 === 0 ? loaded : [...loaded].reverse()) {
    cpu.get(name)!.push(await cpuUsPerChat(SessionActor, chats));
  }
}
for (const [name, samples] of cpu) {
  samples.sort((a, b) => a - b);
  console.log(
    `${name}: CPU per chat, median of 10 rounds ${samples[5]!.toFixed(1)} µs (min ${samples[0]!.toFixed(1)})`,
  );
}
