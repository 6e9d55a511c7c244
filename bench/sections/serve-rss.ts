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
const BURST_SETTLE_MS = 3_000;
/**
 * Quiet time before the second reading, with no collection forced by the bench: what the process
 * gives back by itself (V8, and the host's own quiet collection, `--quiet-gc`, after 10 s).
 */
const IDLE_MS = 30_000;
/**
 * Then forced full collections this far apart until RSS moves by less than `STEADY_FRACTION` (at
 * most `STEADY_TRIES`): V8's memory reducer starts about 8 s after a full collection of a process
 * that stopped allocating and runs a few compacting collections some seconds apart, so a poll
 * shorter than that delay would see no change and stop too early.
 */
const STEADY_POLL_MS = 10_000;
const STEADY_FRACTION = 0.01;
const STEADY_TRIES = 8;
const LEASE_TTL = "5m";

interface Measured {
  rssKb: number;
  rssBeforeGcKb: number;
  heapUsedKb: number;
  heapTotalKb: number;
}

/** A `serve` in a child process (bench/serve-probe.ts) that answers "measure" over IPC. */
class ServeProbe {
  readonly #child: ChildProcess;
  readonly #exited: Promise<unknown>;

  private constructor(child: ChildProcess) {
    this.#child = child;
    this.#exited = once(child, "exit");
  }

  static async start(args: readonly string[]): Promise<ServeProbe> {
    const child = fork(new URL("../serve-probe.js", import.meta.url), [...args], {
      execArgv: ["--expose-gc"],
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

  /** VmRSS now, without collecting garbage first. */
  async rss(): Promise<number> {
    const answer = once(this.#child, "message");
    this.#child.send({ kind: "rss" });
    const [message] = (await answer) as [{ rssKb: number }];
    return message.rssKb;
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode !== null) return;
    this.#child.send({ kind: "stop" });
    await this.#exited;
  }
}

/** How often one session's opening chat is sent again after a retryable refusal (`overloaded`) before the bench gives up. */
const MAX_RETRIES = 50;

/**
 * Sends one short chat to each of `sessions` new sessions, `IN_FLIGHT` at a time; a retryable
 * refusal (a host shedding load on a busy machine answers `overloaded`) is sent again a moment
 * later, as a client should; throws on any other failed reply.
 */
async function openSessions(client: NatsBus, subject: string, names: readonly string[]): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < names.length) {
      const session = names[next++]!;
      for (let attempt = 0; ; attempt++) {
        const reply = await client.request(subject, JSON.stringify({ session, text: "hi" }), {
          timeoutMs: 120_000,
        });
        const parsed = JSON.parse(reply.data) as { ok?: boolean; error?: { code?: string } };
        if (parsed.ok === true) break;
        if (parsed.error?.code !== "overloaded" || attempt >= MAX_RETRIES)
          throw new Error(`serve RSS bench: a chat failed: ${reply.data}`);
        await sleep(100 + Math.random() * 200);
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface IdlePoint extends Measured {
  /** VmRSS `BURST_SETTLE_MS` after the last reply, no collection forced. */
  afterBurstKb: number;
  /** VmRSS after `IDLE_MS` of quiet, before the bench's first forced collection. */
  quietKb: number;
}

/**
 * The process's figures once it is idle: RSS shortly after the burst (the transient), after
 * `IDLE_MS` of quiet (what the process gave back by itself), then forced collections until RSS is steady.
 */
async function idlePoint(probe: ServeProbe): Promise<IdlePoint> {
  await sleep(BURST_SETTLE_MS);
  const afterBurstKb = await probe.rss();
  await sleep(IDLE_MS - BURST_SETTLE_MS);
  let last = await probe.measure();
  const quietKb = last.rssBeforeGcKb;
  for (let tries = 0; tries < STEADY_TRIES; tries++) {
    await sleep(STEADY_POLL_MS);
    const next = await probe.measure();
    const moved = Math.abs(next.rssKb - last.rssKb) / last.rssKb;
    last = next;
    if (moved < STEADY_FRACTION) break;
  }
  return { ...last, afterBurstKb, quietKb };
}

/** One sample, KB per session: growth between the two idle points ÷ sessions. */
interface Sample {
  rssKb: number;
  quietKb: number;
  afterBurstKb: number;
  heapKb: number;
  heapTotalKb: number;
}

/**
 * One `serve` with `history`: opens `warmup` sessions, measures, opens `count` more, measures; the
 * growth between the two measures divided by `count` is the sample (RSS and heap, KB per session).
 */
async function measureServe(
  settings: BenchSettings,
  history: "sqlite" | "nats",
  count: number,
  warmup: number,
): Promise<Sample> {
  const prefix = `rss${history}${Date.now().toString(36)}`;
  const probe = await ServeProbe.start([
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
  ]);
  const client = await NatsBus.connect({ url: settings.natsUrl, name: "agentloop-bench-rss-client" });
  try {
    const subject = chatSubject(prefix, "assistant");
    const names = (from: number, length: number) => Array.from({ length }, (_, index) => `s${from + index}`);
    await openSessions(client, subject, names(0, warmup));
    const before = await idlePoint(probe);
    await openSessions(client, subject, names(warmup, count));
    const after = await idlePoint(probe);
    const per = (key: keyof IdlePoint) => (after[key] - before[key]) / count;
    return {
      rssKb: per("rssKb"),
      quietKb: per("quietKb"),
      afterBurstKb: per("afterBurstKb"),
      heapKb: per("heapUsedKb"),
      heapTotalKb: per("heapTotalKb"),
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
    sqlite: { history: "sqlite", label: "default history" },
    nats: { history: "nats", label: "`--history nats`" },
  } as const;
  type Variant = keyof typeof variants;
  const names = Object.keys(variants) as Variant[];
  const samples = Object.fromEntries(names.map((name) => [name, [] as Sample[]]));
  for (let run = 0; run < runs; run++) {
    for (const name of names)
      samples[name]!.push(await measureServe(settings, variants[name].history, count, warmup));
  }
  const figure = (name: Variant, key: keyof Sample): Measure =>
    summarise(samples[name]!.map((sample) => sample[key]));
  const label = count.toLocaleString("en-US");
  const rows: Row[] = names.flatMap((name) => {
    const heap = figure(name, "heapKb");
    const row = (what: string, key: keyof Sample): Row => ({
      metric: `RSS of a real \`serve\` per idle session at ${label} (${variants[name].label}), ${what}: RSS growth vs heap growth per session`,
      agentloop: figure(name, key),
      baseline: heap,
      unit: "KB",
      digits: 2,
    });
    return [
      row("idle (steady)", "rssKb"),
      row(`after ${IDLE_MS / 1000} s of quiet, no GC forced by the bench`, "quietKb"),
      row(`${BURST_SETTLE_MS / 1000} s after the last chat (transient)`, "afterBurstKb"),
    ];
  });
  return {
    title: "Serve RSS",
    rows,
    targets: names.map((name) => ({
      target: `≤ 8 KB of RSS per idle session in a real \`serve\` (${variants[name].label})`,
      stands: `${figure(name, "rssKb").median.toFixed(1)} KB steady, ${figure(name, "quietKb").median.toFixed(1)} KB before the bench forces a GC (heap ${figure(name, "heapKb").median.toFixed(1)} KB; ${figure(name, "afterBurstKb").median.toFixed(1)} KB ${BURST_SETTLE_MS / 1000} s after the burst)`,
      met: figure(name, "rssKb").median <= 8 && figure(name, "quietKb").median <= 8,
    })),
    notes: [
      `Serve RSS: \`agentloop serve\` (the built CLI's main, bench/serve-probe.ts, under \`node --expose-gc\`) on the bench's nats-server with the demo model; a client opens ${warmup.toLocaleString("en-US")} warm-up sessions, then ${label} more, each with one chat ("hi"), ${IN_FLIGHT} chats in flight. At each of the two points (after the warm-up, after the rest) the bench reads VmRSS ${BURST_SETTLE_MS / 1000} s after the last reply (every session idle, the process still holding what the burst took: a full young generation, old-space pages not yet compacted, V8's pool of free pages), again after ${IDLE_MS / 1000} s of quiet before the bench forces any collection (V8 compacts the old space and returns free pages only after full collections; a process that goes quiet right after a burst may run none and keep what the burst took, so the host runs its own once it has been quiet for 10 s, \`--quiet-gc\`), then has the probe collect garbage twice and read VmRSS and heapUsed every ${STEADY_POLL_MS / 1000} s until RSS moves less than ${STEADY_FRACTION * 100} % (the steady idle figure: the full collection starts the reducer, which then runs its own compacting collections). Each figure's growth between the two points ÷ ${label} is one sample (${runs} per variant, a fresh \`serve\` each). Default history is SQLite in memory (no \`--db\`): the conversations themselves stay in the process; \`--history nats\` keeps them in JetStream. \`--lease-ttl ${LEASE_TTL}\`: at the default 10 s, a loaded machine (load average 15–18) let the host's own lease run out during the 400-chat bursts, and the host cancelled every running chat.`,
    ],
  };
}
