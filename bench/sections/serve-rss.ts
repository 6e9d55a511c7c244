import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import type { Row } from "../support/report.js";
import type { BenchSettings, SectionResult } from "../support/section.js";
import { type Measure, summarise } from "../support/stats.js";

/** Chats in flight while the sessions are opened (the demo model streams a word every 20 ms). */
const IN_FLIGHT = 400;
/** Longer than a session's mailbox linger (1 s): by then every session that chatted is idle. */
const SETTLE_MS = 3_000;
const LEASE_TTL = "5m";
/** The young generation's cap in the third variant, in MB (node's default: 16 per semi-space). */
const SMALL_SEMI_SPACE_MB = 2;

interface Measured {
  rssKb: number;
  heapUsedKb: number;
}

/** A `serve` in a child process (bench/serve-probe.ts) that answers "measure" over IPC. */
class ServeProbe {
  readonly #child: ChildProcess;
  readonly #exited: Promise<unknown>;

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.#exited = once(child, "exit");
  }

  static async start(args: readonly string[], nodeFlags: readonly string[]): Promise<ServeProbe> {
    const child = fork(new URL("../serve-probe.js", import.meta.url), [...args], {
      execArgv: ["--expose-gc", ...nodeFlags],
      // The demo model, whatever keys the bench's environment carries.
      env: { ...process.env, AGENTLOOP_PROVIDER: "demo", ANTHROPIC_API_KEY: "", OPENAI_API_KEY: "" },
      stdio: ["ignore", "pipe", "pipe", "ipc"],
    });
    const probe = new ServeProbe(child);
    let output = "";
    const ready = new Promise<void>((resolve, reject) => {
      child.stdout?.on("data", (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes("agentloop serve: bus")) resolve();
      });
      child.stderr?.on("data", (chunk: Buffer) => {
        output += chunk.toString();
      });
      child.once("exit", (code) =>
        reject(new Error(`serve exited (${code}) before it was ready: ${output}`)),
      );
    });
    await ready;
    return probe;
  }

  async measure(): Promise<Measured> {
    const answer = once(this.#child, "message");
    this.#child.send({ kind: "measure" });
    const [message] = (await answer) as [Measured];
    return message;
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    this.#child.send({ kind: "stop" });
    await this.#exited;
  }
}

/** Sends one short chat to each of `sessions` new sessions, `IN_FLIGHT` at a time; throws on a failed reply. */
async function openSessions(client: NatsBus, subject: string, names: readonly string[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const session = names[next++]!;
      const reply = await client.request(subject, JSON.stringify({ session, text: "hi" }), {
        timeoutMs: 120_000,
      });
      const parsed = JSON.parse(reply.data) as { ok?: boolean };
      if (parsed.ok !== true) throw new Error(`serve RSS bench: a chat failed: ${reply.data}`);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));

/**
 * One `serve` with `history`: opens `warmup` sessions, measures, opens `count` more, measures; the
 * growth between the two measures divided by `count` is the sample (RSS and heap, KB per session).
 */
async function measureServe(
  settings: BenchSettings,
  history: "sqlite" | "nats",
  count: number,
  warmup: number,
  nodeFlags: readonly string[] = [],
): Promise<{ rssKb: number; heapKb: number }> {
  const prefix = `rss${history}${Date.now().toString(36)}`;
  const probe = await ServeProbe.start(
    [
      "serve",
      "--nats",
      settings.natsUrl,
      "--prefix",
      prefix,
      "--history",
      history,
      "--max-sessions",
      String(count + warmup + 1),
      // The host renews its own lease every third of the TTL; with 400 chats in flight on a loaded
      // machine a renewal can come later than the default 10 s allows, and the host then cancels
      // every chat it runs. A long TTL keeps the figure about memory.
      "--lease-ttl",
      LEASE_TTL,
    ],
    nodeFlags,
  );
  const client = await NatsBus.connect({ url: settings.natsUrl, name: "agentloop-bench-rss-client" });
  try {
    const subject = chatSubject(prefix, "assistant");
    const names = (from: number, length: number) => Array.from({ length }, (_, index) => `s${from + index}`);
    await openSessions(client, subject, names(0, warmup));
    await settle();
    const before = await probe.measure();
    await openSessions(client, subject, names(warmup, count));
    await settle();
    const after = await probe.measure();
    return {
      rssKb: (after.rssKb - before.rssKb) / count,
      heapKb: (after.heapUsedKb - before.heapUsedKb) / count,
    };
  } finally {
    await client.close();
    await probe.stop();
  }
}

/**
 * RSS of a real `serve` per idle session: the built CLI on the bench's nats-server, one short chat
 * per session with the demo model, default history and `--history nats`.
 */
export async function benchServeRss(settings: BenchSettings): Promise<SectionResult> {
  const count = settings.isQuick ? 1_000 : 10_000;
  const warmup = settings.isQuick ? 200 : 1_000;
  const runs = settings.isQuick ? 1 : Math.min(2, settings.runs);
  const variants = {
    sqlite: { history: "sqlite", nodeFlags: [], label: "default history" },
    nats: { history: "nats", nodeFlags: [], label: "`--history nats`" },
    small: {
      history: "sqlite",
      nodeFlags: [`--max-semi-space-size=${SMALL_SEMI_SPACE_MB}`],
      label: `default history, node \`--max-semi-space-size=${SMALL_SEMI_SPACE_MB}\``,
    },
  } as const;
  type Variant = keyof typeof variants;
  const names = Object.keys(variants) as Variant[];
  const samples = Object.fromEntries(names.map((name) => [name, [] as { rssKb: number; heapKb: number }[]]));
  for (let run = 0; run < runs; run++) {
    for (const name of names) {
      const { history, nodeFlags } = variants[name];
      samples[name]!.push(await measureServe(settings, history, count, warmup, nodeFlags));
    }
  }
  const rss = (name: Variant): Measure => summarise(samples[name]!.map((sample) => sample.rssKb));
  const heap = (name: Variant): Measure => summarise(samples[name]!.map((sample) => sample.heapKb));
  const label = count.toLocaleString("en-US");
  const rows: Row[] = names.map((name) => ({
    metric: `RSS of a real \`serve\` per idle session at ${label} (${variants[name].label}): RSS growth vs heap growth per session`,
    agentloop: rss(name),
    baseline: heap(name),
    unit: "KB",
    digits: 2,
  }));
  return {
    title: "Serve RSS",
    rows,
    targets: names.map((name) => ({
      target: `≤ 8 KB of RSS per idle session in a real \`serve\` (${variants[name].label})`,
      stands: `${rss(name).median.toFixed(1)} KB (heap ${heap(name).median.toFixed(1)} KB)`,
      met: rss(name).median <= 8,
    })),
    notes: [
      `Serve RSS: \`agentloop serve\` (the built CLI's main, bench/serve-probe.ts, under \`node --expose-gc\`) on the bench's nats-server with the demo model; a client opens ${warmup.toLocaleString("en-US")} warm-up sessions, then ${label} more, each with one chat ("hi"), ${IN_FLIGHT} chats in flight. ${SETTLE_MS / 1000} s after the last reply (every session idle) the probe collects garbage twice and reads VmRSS from /proc/self/status and heapUsed; the growth from the warm-up point to the end, divided by ${label}, is one sample (${runs} per variant, a fresh \`serve\` each). Default history is SQLite in memory (no \`--db\`): the conversations themselves stay in the heap; \`--history nats\` keeps them in JetStream. The third variant caps V8's young generation (\`--max-semi-space-size=${SMALL_SEMI_SPACE_MB}\`, a node flag, e.g. in NODE_OPTIONS), to tell how much of the RSS beyond the heap the chat bursts' young generation is. \`--lease-ttl ${LEASE_TTL}\`: at the default 10 s, a loaded machine (load average 15–18) let the host's own lease run out during the 400-chat bursts, and the host cancelled every running chat.`,
    ],
  };
}
