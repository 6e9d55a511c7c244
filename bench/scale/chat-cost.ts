/**
 * What one chat costs a `serve --history nats` host that holds many live sessions: ONE host (dist/)
 * on a private nats-server with JetStream and monitoring, a zero-latency fake provider; sessions
 * are opened level by level (one short chat each), then at each level chats go to random live
 * sessions at fixed rates for a few seconds each. Per rate it prints answered/s, p50/p99 latency
 * (from each chat's scheduled send time), the host's and nats-server's CPU per answered chat
 * (/proc of each), the JetStream writes (growth of every stream's last sequence), JetStream API
 * requests (by kind, from a subscription to `$JS.API.>`) and core messages into the server per
 * chat, the host's event loop delay max and its GC time (from host-probe.ts, loaded with
 * `--import`), and failures by error code.
 *
 * The machine may be shared: CPU per chat is the figure to compare, not wall time.
 *
 * `npm run build:emit && node dist/bench/scale/chat-cost.js [--sessions 1000,10000] [--rates 50,100,200]
 *   [--seconds 10] [--profile DIR] [--host-arg ARG]… [--bin PATH]`
 *
 * `--host-arg` passes one argument on to `serve` (repeat it); `--bin` runs another build's CLI
 * (e.g. `dist/src/cli/bin.js` of an older commit built elsewhere) for a before/after on one machine.
 * `--pause-host S` ends the run by stopping the host (SIGSTOP) for S seconds, longer than its lease
 * TTL (10 s), so that on SIGCONT it finds its lease lost and stops every session: it prints the
 * host's CPU over the 10 s after the resume and how many log lines the stopped sessions took.
 *
 * `--profile DIR` writes one CPU profile of the host per rate phase (`DIR/<n>.cpuprofile`, in the
 * order the phases ran), for `--cpu-prof`-style reading (Chrome DevTools, speedscope), and a
 * sampling heap profile of the same phase (`DIR/<n>.heapprofile`, garbage included).
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseChatReply } from "../../src/bus/contract.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { DEFAULT_SHARD_COUNT } from "../../src/cluster/shard-map.js";
import { chatTurnSse, type FakeProvider, startFakeProvider } from "../../src/testing/index.js";
import { type BenchNatsServer, startNatsServer } from "../support/nats-server.js";
import { percentile } from "../support/stats.js";
import type { ProbeLine } from "./host-probe.js";
import { cpuSeconds, rssBytes, ScaleHosts, sleep, waitForHost } from "./scale-hosts.js";
import { ShardWatch } from "./shard-watch.js";

const AGENT = "assistant";
const PREFIX = "cost";
const OPEN_CONCURRENCY = 64;
const CHAT_TIMEOUT_MS = 30_000;

interface Args {
  levels: number[];
  rates: number[];
  seconds: number;
  profileDir: string | undefined;
  hostArgs: string[];
  binPath: string | undefined;
  pauseSeconds: number | undefined;
}

const USAGE =
  "usage: chat-cost [--sessions N,N,…] [--rates N,N,…] [--seconds N] [--profile DIR] [--host-arg ARG]… [--bin PATH] [--pause-host S]";

function numbers(flag: string, value: string | undefined): number[] {
  const list = (value ?? "").split(",").map((part) => Number(part.replaceAll("_", "")));
  if (list.length === 0 || list.some((number) => !Number.isSafeInteger(number) || number < 1))
    throw new Error(`${flag} takes positive whole numbers separated by commas, got ${value} (${USAGE})`);
  return list;
}

function parseArgs(argv: readonly string[]): Args {
  const args: Args = {
    levels: [1_000, 10_000],
    rates: [50, 100, 200],
    seconds: 10,
    profileDir: undefined,
    hostArgs: [],
    binPath: undefined,
    pauseSeconds: undefined,
  };
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index];
    const value = argv[index + 1];
    index++;
    if (arg === "--sessions") args.levels = numbers(arg, value).sort((a, b) => a - b);
    else if (arg === "--rates") args.rates = numbers(arg, value);
    else if (arg === "--seconds") [args.seconds] = numbers(arg, value) as [number];
    else if (arg === "--profile" && value !== undefined) args.profileDir = value;
    else if (arg === "--host-arg" && value !== undefined) args.hostArgs.push(value);
    else if (arg === "--bin" && value !== undefined) args.binPath = value;
    else if (arg === "--pause-host") [args.pauseSeconds] = numbers(arg, value) as [number];
    else throw new Error(`unknown or incomplete argument ${arg} (${USAGE})`);
  }
  return args;
}

/** What the server says about itself: core messages in, JetStream API requests, stream writes. */
interface ServerCounts {
  inMsgs: number;
  apiTotal: number;
  streamWrites: number;
  /** Each stream's last sequence. */
  byStream: Map<string, number>;
}

interface JszStream {
  name: string;
  state: { last_seq: number };
}
interface Jsz {
  api: { total: number };
  account_details?: { stream_detail?: JszStream[] }[];
}

async function serverCounts(monitorUrl: string): Promise<ServerCounts> {
  const varz = (await (await fetch(`${monitorUrl}/varz`)).json()) as { in_msgs: number };
  const jsz = (await (await fetch(`${monitorUrl}/jsz?streams=1`)).json()) as Jsz;
  let streamWrites = 0;
  const byStream = new Map<string, number>();
  for (const account of jsz.account_details ?? []) {
    for (const stream of account.stream_detail ?? []) {
      streamWrites += stream.state.last_seq;
      byStream.set(stream.name, stream.state.last_seq);
    }
  }
  return { inMsgs: varz.in_msgs, apiTotal: jsz.api.total, streamWrites, byStream };
}

/** Counts JetStream API requests by kind (`STREAM.MSG.GET`, `DIRECT.GET`, …) while it runs. */
class ApiCounter {
  readonly counts = new Map<string, number>();
  #isCounting = false;

  constructor(bus: NatsBus) {
    const subscription = bus.connection.subscribe("$JS.API.>");
    void (async () => {
      for await (const message of subscription) {
        if (!this.#isCounting) continue;
        const parts = message.subject.split(".");
        // `$JS.API.STREAM.MSG.GET.<stream>` → `STREAM.MSG.GET`; `$JS.API.DIRECT.GET.<stream>.…` → `DIRECT.GET`.
        const kind = parts.slice(2, parts[2] === "STREAM" && parts[3] === "MSG" ? 5 : 4).join(".");
        this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
      }
    })();
  }

  start(): void {
    this.counts.clear();
    this.#isCounting = true;
  }

  stop(): void {
    this.#isCounting = false;
  }
}

type FailureCounts = Record<string, number>;

async function chatOnce(bus: NatsBus, session: string, text: string): Promise<string | undefined> {
  try {
    const reply = await bus.request(chatSubject(PREFIX, AGENT), JSON.stringify({ session, text }), {
      timeoutMs: CHAT_TIMEOUT_MS,
    });
    const parsed = parseChatReply(reply.data);
    if (!parsed.ok) return "unparsable";
    return parsed.value.ok ? undefined : parsed.value.error.code;
  } catch {
    return "no reply";
  }
}

const sessionName = (index: number) => `s${index}`;

async function openSessions(bus: NatsBus, from: number, to: number): Promise<number> {
  let next = from;
  let failures = 0;
  const worker = async () => {
    while (next < to) {
      const index = next++;
      if ((await chatOnce(bus, sessionName(index), "hello")) !== undefined) failures++;
    }
  };
  await Promise.all(Array.from({ length: OPEN_CONCURRENCY }, worker));
  return failures;
}

interface Phase {
  sessions: number;
  rate: number;
  sent: number;
  answered: number;
  failures: FailureCounts;
  /** Answered per second, from the first send to the last answer. */
  answeredRate: number;
  p50Ms: number;
  p99Ms: number;
  hostCpuMsPerChat: number;
  natsCpuMsPerChat: number;
  writesPerChat: number;
  writesByStream: string;
  apiPerChat: number;
  inMsgsPerChat: number;
  apiKinds: string;
  loopMaxMs: number;
  gcMs: number;
  gcMaxMs: number;
  load: number;
}

/** Chats at `rate`/s to random live sessions for `seconds`, at most 4 s of them in flight (as `npm run scale`). */
async function runPhase(
  context: { bus: NatsBus; nats: BenchNatsServer; hostPid: number; probeFile: string; api: ApiCounter },
  sessions: number,
  rate: number,
  seconds: number,
  onProfile: () => void,
): Promise<Phase> {
  const { bus, nats, hostPid, probeFile, api } = context;
  const monitorUrl = nats.monitorUrl!;
  const before = await serverCounts(monitorUrl);
  const hostCpuBefore = cpuSeconds(hostPid);
  const natsCpuBefore = cpuSeconds(nats.pid);
  const startedAt = Date.now();
  onProfile();
  api.start();
  const total = rate * seconds;
  const maxInFlight = Math.max(50, rate * 4);
  const latencies: number[] = [];
  const failures: FailureCounts = {};
  let sent = 0;
  let inFlight = 0;
  const pending: Promise<void>[] = [];
  const start = performance.now();
  while (sent < total && performance.now() - start < seconds * 1000) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate));
    while (sent < due && inFlight < maxInFlight) {
      const scheduled = start + (sent / rate) * 1000;
      const session = sessionName(Math.floor(Math.random() * sessions));
      sent++;
      inFlight++;
      pending.push(
        chatOnce(bus, session, "again").then((failure) => {
          inFlight--;
          if (failure === undefined) latencies.push(performance.now() - scheduled);
          else failures[failure] = (failures[failure] ?? 0) + 1;
        }),
      );
    }
    await sleep(5);
  }
  await Promise.all(pending);
  const elapsed = (performance.now() - start) / 1000;
  // Writes a chat leaves behind (history, journal) land a moment after its answer.
  await sleep(1_000);
  api.stop();
  onProfile();
  const endedAt = Date.now();
  const after = await serverCounts(monitorUrl);
  const hostCpu = cpuSeconds(hostPid) - hostCpuBefore;
  const natsCpu = cpuSeconds(nats.pid) - natsCpuBefore;
  const probe = await probeLines(probeFile, startedAt, endedAt);
  latencies.sort((a, b) => a - b);
  const answered = latencies.length;
  const per = (value: number) => value / Math.max(1, answered);
  const apiTotal = after.apiTotal - before.apiTotal;
  return {
    sessions,
    rate,
    sent,
    answered,
    failures,
    answeredRate: answered / elapsed,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    hostCpuMsPerChat: per(hostCpu * 1000),
    natsCpuMsPerChat: per(natsCpu * 1000),
    writesPerChat: per(after.streamWrites - before.streamWrites),
    writesByStream: [...after.byStream.entries()]
      .map(([name, last]) => [name, last - (before.byStream.get(name) ?? 0)] as const)
      .filter(([, count]) => count > 0)
      .sort(([, a], [, b]) => b - a)
      .map(([name, count]) => `${name} ${per(count).toFixed(2)}`)
      .join(", "),
    apiPerChat: per(apiTotal),
    inMsgsPerChat: per(after.inMsgs - before.inMsgs),
    apiKinds: [...api.counts.entries()]
      .sort(([, a], [, b]) => b - a)
      .map(([kind, count]) => `${kind} ${per(count).toFixed(2)}`)
      .join(", "),
    loopMaxMs: Math.max(0, ...probe.map((line) => line.loopMaxMs)),
    gcMs: probe.reduce((sum, line) => sum + line.gcMs, 0),
    gcMaxMs: Math.max(0, ...probe.map((line) => line.gcMaxMs)),
    load: loadavg()[0] ?? Number.NaN,
  };
}

/**
 * The probe's lines of a phase: from its start up to and including the first line written after its
 * end. A stall writes no line until it is over, so that one covers the stall even when it ended
 * after the phase; it is waited for (up to 60 s).
 */
async function probeLines(probeFile: string, startedAt: number, endedAt: number): Promise<ProbeLine[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const lines = (await readFile(probeFile, "utf8"))
      .split("\n")
      .filter((line) => line !== "")
      .map((line) => JSON.parse(line) as ProbeLine)
      .filter((line) => line.at > startedAt);
    const last = lines.findIndex((line) => line.at > endedAt);
    if (last >= 0) return lines.slice(0, last + 1);
    if (Date.now() > deadline) return lines;
    await sleep(250);
  }
}

function describePhase(phase: Phase): string {
  const failed = Object.entries(phase.failures)
    .map(([reason, count]) => `${reason} ${count}`)
    .join(", ");
  return [
    `${phase.sessions} sessions, ${phase.rate}/s: ${phase.answered} of ${phase.sent} answered (${phase.answeredRate.toFixed(0)}/s), p50 ${phase.p50Ms.toFixed(0)} ms, p99 ${phase.p99Ms.toFixed(0)} ms${failed === "" ? "" : `; failed: ${failed}`}`,
    `  per answered chat: host CPU ${phase.hostCpuMsPerChat.toFixed(2)} ms, nats-server CPU ${phase.natsCpuMsPerChat.toFixed(2)} ms, JetStream writes ${phase.writesPerChat.toFixed(2)} (${phase.writesByStream}), JetStream API requests ${phase.apiPerChat.toFixed(2)} (${phase.apiKinds}), messages into the server ${phase.inMsgsPerChat.toFixed(1)}`,
    `  host: event loop delay max ${phase.loopMaxMs.toFixed(0)} ms, GC ${phase.gcMs.toFixed(0)} ms (longest pause ${phase.gcMaxMs.toFixed(0)} ms); load average ${phase.load.toFixed(2)}`,
  ].join("\n");
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const directory = await mkdtemp(join(tmpdir(), "agentloop-chat-cost-"));
  let nats: BenchNatsServer | undefined;
  let provider: FakeProvider | undefined;
  let hosts: ScaleHosts | undefined;
  let bus: NatsBus | undefined;
  const killOnExit = () => {
    hosts?.killAll();
    if (nats?.pid !== undefined) {
      try {
        process.kill(nats.pid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
  };
  process.once("exit", killOnExit);
  process.once("SIGINT", () => process.exit(130));
  try {
    nats = await startNatsServer({ isMonitored: true });
    provider = await startFakeProvider("openai-chat", { script: () => chatTurnSse({ text: ["ok"] }) });
    const agentsFile = join(directory, "agents.json");
    await writeFile(agentsFile, JSON.stringify({ agents: [{ name: AGENT, tools: [], maxIterations: 2 }] }));
    const probeFile = join(directory, "probe.jsonl");
    const maxSessions = String(Math.max(...args.levels) * 2);
    hosts = new ScaleHosts({
      natsUrl: nats.url,
      prefix: PREFIX,
      agentsFile,
      directory,
      env: {
        ...provider.env,
        AGENTLOOP_PROBE_FILE: probeFile,
        ...(args.profileDir === undefined
          ? {}
          : { AGENTLOOP_PROBE_PROFILE_DIR: args.profileDir, AGENTLOOP_PROBE_HEAP: "1" }),
      },
      extraArgs: ["--max-sessions", maxSessions, "--lease-ttl", "10000ms", ...args.hostArgs],
      nodeArgs: ["--import", fileURLToPath(new URL("./host-probe.js", import.meta.url))],
      ...(args.binPath === undefined ? {} : { binPath: args.binPath }),
    });
    bus = await NatsBus.connect({ url: nats.url, name: "agentloop chat-cost" });
    const host = hosts.start("h1");
    let stoppedLines = 0;
    host.child.stderr?.on("data", (chunk: string | Buffer) => {
      stoppedLines += String(chunk).split("stopped here").length - 1;
    });
    await waitForHost(bus, PREFIX, AGENT, host);
    const shards = await ShardWatch.open(bus.connection, PREFIX);
    while ((shards.counts(DEFAULT_SHARD_COUNT).get("h1") ?? 0) < DEFAULT_SHARD_COUNT) await sleep(50);
    shards.close();
    const api = new ApiCounter(bus);
    const hostPid = host.child.pid!;
    console.log(
      `1 host holding ${DEFAULT_SHARD_COUNT} shards; node ${process.version}; load average ${loadavg()[0]?.toFixed(2)}`,
    );
    let opened = 0;
    for (const level of args.levels) {
      const at = performance.now();
      const failed = await openSessions(bus, opened, level);
      console.log(
        `opened ${level - opened} sessions at ${((level - opened) / ((performance.now() - at) / 1000)).toFixed(0)}/s (${failed} failed); host RSS ${(rssBytes(hostPid) / 1e6).toFixed(0)} MB`,
      );
      opened = level;
      for (const rate of args.rates) {
        await sleep(3_000);
        if (!host.isRunning()) throw new Error(`the host exited: ${host.output().slice(-800)}`);
        // Without a profile dir the host has no SIGUSR2 handler (and the signal would end it).
        const toggleProfile = () => {
          if (args.profileDir !== undefined) host.child.kill("SIGUSR2");
        };
        const phase = await runPhase(
          { bus, nats, hostPid, probeFile, api },
          level,
          rate,
          args.seconds,
          toggleProfile,
        );
        console.log(describePhase(phase));
      }
    }
    if (args.pauseSeconds !== undefined) {
      host.child.kill("SIGSTOP");
      await sleep(args.pauseSeconds * 1000);
      const cpuBefore = cpuSeconds(hostPid);
      const linesBefore = stoppedLines;
      host.child.kill("SIGCONT");
      await sleep(10_000);
      console.log(
        `paused ${args.pauseSeconds} s, resumed: host CPU over the next 10 s ${((cpuSeconds(hostPid) - cpuBefore) * 1000).toFixed(0)} ms; ${stoppedLines - linesBefore} "stopped here" log lines; host RSS ${(rssBytes(hostPid) / 1e6).toFixed(0)} MB`,
      );
    }
    const notices = host.leaseNotices();
    if (notices.length > 0) console.log(`h1 on its own lease:\n  ${notices.join("\n  ")}`);
    if (args.profileDir === undefined) return;
    // The last profile is written once the host has stopped it.
    await sleep(2_000);
  } finally {
    hosts?.killAll();
    await bus?.close().catch(() => undefined);
    await provider?.close().catch(() => undefined);
    await nats?.stop().catch(() => undefined);
    await rm(directory, { recursive: true, force: true });
    process.removeListener("exit", killOnExit);
  }
}

await main();
