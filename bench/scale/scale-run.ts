/**
 * The scale run: three `agentloop serve --history nats` processes (dist/) on one private
 * nats-server with JetStream and a zero-latency fake provider. It opens sessions level by level
 * (one short chat each, at a steady bounded concurrency) and at each level measures the idle
 * upkeep (JetStream writes/s, host CPU, RSS) and the chat latency at a steady rate; then a fourth
 * host joins (hand-off) and leaves, and one of the three is killed with SIGKILL (failover).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jetstreamManager } from "@nats-io/jetstream";
import { parseChatReply } from "../../src/bus/contract.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { DEFAULT_LEASE_TTL_MS } from "../../src/cluster/session-lease.js";
import { assignShards, DEFAULT_SHARD_COUNT, shardOf } from "../../src/cluster/shard-map.js";
import { chatTurnSse, type FakeProvider, startFakeProvider } from "../../src/testing/index.js";
import { type BenchNatsServer, startNatsServer } from "../support/nats-server.js";
import { percentile } from "../support/stats.js";
import { cpuSeconds, rssBytes, type ScaleHost, ScaleHosts, sleep, waitForHost } from "./scale-hosts.js";
import { ShardWatch } from "./shard-watch.js";

const AGENT = "assistant";
const PREFIX = "scale";
/** Sessions of the baseline the idle figures are compared with. */
export const BASELINE_SESSIONS = 100;
/** From the last chat of a level to its idle window: past the hosts' quiet collection (see measureIdle). */
export const IDLE_SETTLE_MS = 40_000;

export interface ScaleOptions {
  /** Live sessions at each level, ascending (sessions are added, never closed, between levels). */
  levels: readonly number[];
  /** Chats per second of the latency phase. */
  chatRate: number;
  /** How long each latency phase sends, seconds. */
  chatSeconds: number;
  /** How long each idle measurement lasts, seconds. */
  idleSeconds: number;
  /** Chats in flight while sessions are opened. */
  openConcurrency: number;
  /** Sessions of the killed host asked after the kill. */
  sampleSize: number;
  /** Only the failover: no chat phases and no hand-off (a quick look at the failover alone). */
  isFailoverOnly?: boolean;
  leaseTtlMs?: number;
  signal: AbortSignal;
  log: (line: string) => void;
}

export interface ProcessFigures {
  rssBytes: number;
  /** Share of one core used over the idle window, percent. */
  cpuPercent: number;
}

export interface ChatFigures {
  targetRate: number;
  /** Chats answered per second, from the first send to the last answer (below the target when the in-flight cap held chats back). */
  reachedRate: number;
  sent: number;
  failed: number;
  failures: FailureCounts;
  p50Ms: number;
  p99Ms: number;
  /** CPU of every host together, then of nats-server, per answered chat (ms): what the load costs, whatever the machine's load. */
  hostCpuMsPerChat: number;
  natsCpuMsPerChat: number;
}

export interface LevelFigures {
  sessions: number;
  /** Sessions that failed to open (their chat failed) at this level. */
  openFailures: number;
  /** Sessions opened per second while reaching this level (undefined for the baseline). */
  openRate: number | undefined;
  writesPerSecond: number;
  hosts: ProcessFigures[];
  nats: ProcessFigures;
  chat: ChatFigures | undefined;
  /** When the target rate was not reached: the same at 70 % of the rate reached, a load it sustains. */
  sustainedChat: ChatFigures | undefined;
  /** The three hosts at the rate one host sustained (see {@link ScaleReport.oneHost}), when neither phase above ran at it. */
  comparedChat: ChatFigures | undefined;
}

/** The same chats on one host alone, before the other two start: what the three hosts' latency is compared with. */
export interface OneHostFigures {
  chat: ChatFigures;
  sustainedChat: ChatFigures | undefined;
}

/** The rate the one-host figures hold at: the target when one host reached it, else the sustained phase's. */
export function oneHostRate(oneHost: OneHostFigures): ChatFigures {
  return oneHost.sustainedChat ?? oneHost.chat;
}

export interface ScaleReport {
  shardCount: number;
  leaseTtlMs: number;
  baseline: LevelFigures;
  levels: LevelFigures[];
  /** Undefined with `isFailoverOnly`. */
  oneHost: OneHostFigures | undefined;
  handoff: { joinReadyMs: number; joinBalancedMs: number; movedToNew: number; leaveMs: number } | undefined;
  failover:
    | {
        victimShards: number;
        victimSessions: number;
        sample: number;
        reownedMs: number;
        sampleAnsweredMs: number;
        sampleUnanswered: number;
      }
    | undefined;
  /** Why sessions failed to open, over the whole run. */
  openFailures: FailureCounts;
  durationMs: number;
}

/** Thrown when the run was interrupted (Ctrl-C). */
export class ScaleAbortedError extends Error {
  constructor() {
    super("interrupted");
    this.name = "ScaleAbortedError";
  }
}

interface Context {
  bus: NatsBus;
  hosts: ScaleHosts;
  shards: ShardWatch;
  nats: BenchNatsServer;
  options: ScaleOptions;
  /** Why sessions failed to open, over the whole run. */
  openFailures: FailureCounts;
  check(): void;
}

/** Runs the whole scale measurement; everything it started is stopped before it returns or throws. */
export async function runScale(options: ScaleOptions): Promise<ScaleReport> {
  const started = performance.now();
  const check = () => {
    if (options.signal.aborted) throw new ScaleAbortedError();
  };
  const leaseTtlMs = options.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS;
  const directory = await mkdtemp(join(tmpdir(), "agentloop-scale-"));
  let nats: BenchNatsServer | undefined;
  let provider: FakeProvider | undefined;
  let hosts: ScaleHosts | undefined;
  let bus: NatsBus | undefined;
  let shards: ShardWatch | undefined;
  // Last resort (a second Ctrl-C exits at once): no host and no nats-server outlives the run.
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
  try {
    nats = await startNatsServer();
    // Zero latency: one text delta and the end of the turn, at once.
    provider = await startFakeProvider("openai-chat", { script: () => chatTurnSse({ text: ["ok"] }) });
    const agentsFile = join(directory, "agents.json");
    await writeFile(agentsFile, JSON.stringify({ agents: [{ name: AGENT, tools: [], maxIterations: 2 }] }));
    const maxSessions = String(Math.max(...options.levels, BASELINE_SESSIONS) * 2);
    hosts = new ScaleHosts({
      natsUrl: nats.url,
      prefix: PREFIX,
      agentsFile,
      directory,
      env: provider.env,
      extraArgs: ["--max-sessions", maxSessions, "--lease-ttl", `${leaseTtlMs}ms`],
    });
    bus = await NatsBus.connect({ url: nats.url, name: "agentloop scale" });
    const readyBus = bus;
    const startHosts = async (ids: readonly string[]) => {
      const started = ids.map((id) => hosts!.start(id));
      await Promise.all(started.map((host) => waitForHost(readyBus, PREFIX, AGENT, host)));
      return started;
    };
    const isComparing = options.isFailoverOnly !== true;
    const first = await startHosts(isComparing ? ["h1"] : ["h1", "h2", "h3"]);
    shards = await ShardWatch.open(bus.connection, PREFIX);
    const context: Context = { bus, hosts, shards, nats, options, openFailures: {}, check };
    await waitUntilBalanced(context, first, 120_000);

    let opened = 0;
    const openTo = async (target: number) => {
      const from = opened;
      const at = performance.now();
      const failures = await openSessions(context, from, target);
      opened = target;
      return { failures, rate: (target - from) / ((performance.now() - at) / 1000) };
    };

    const baselineOpen = await openTo(BASELINE_SESSIONS);
    let oneHost: OneHostFigures | undefined;
    if (isComparing) {
      // The comparison the three hosts' latency is held to: the same chats on one host alone.
      const chat = await measureChats(context, opened, options.chatRate);
      const sustainedChat =
        chat.reachedRate < 0.95 * options.chatRate
          ? await measureChats(context, opened, Math.max(1, Math.round(chat.reachedRate * 0.7)))
          : undefined;
      oneHost = { chat, sustainedChat };
      options.log(
        `one host, ${opened} sessions: chats ${[chat, sustainedChat]
          .filter((figures) => figures !== undefined)
          .map(describeChats)
          .join("; ")}`,
      );
      first.push(...(await startHosts(["h2", "h3"])));
      await waitUntilBalanced(context, first, 120_000);
    }
    options.log(`3 hosts up, shards balanced: ${describeCounts(shards.counts(DEFAULT_SHARD_COUNT))}`);
    const baseline = await measureIdle(context, BASELINE_SESSIONS, baselineOpen.failures, undefined);
    options.log(describeLevel(baseline));
    const levels: LevelFigures[] = [];
    for (const level of options.levels) {
      const open = await openTo(level);
      const figures = await measureIdle(context, level, open.failures, open.rate);
      if (options.isFailoverOnly === true) {
        options.log(describeLevel(figures));
        levels.push(figures);
        continue;
      }
      figures.chat = await measureChats(context, opened, options.chatRate);
      if (figures.chat.reachedRate < 0.95 * options.chatRate) {
        const sustained = Math.max(1, Math.round(figures.chat.reachedRate * 0.7));
        figures.sustainedChat = await measureChats(context, opened, sustained);
      }
      const compared = oneHost === undefined ? undefined : oneHostRate(oneHost).targetRate;
      const isMeasured = [figures.chat, figures.sustainedChat].some((chat) => chat?.targetRate === compared);
      if (compared !== undefined && !isMeasured)
        figures.comparedChat = await measureChats(context, opened, compared);
      options.log(describeLevel(figures));
      levels.push(figures);
    }

    const handoff = options.isFailoverOnly === true ? undefined : await measureHandoff(context);
    const failover = await measureFailover(context, opened, leaseTtlMs);
    return {
      shardCount: DEFAULT_SHARD_COUNT,
      leaseTtlMs,
      baseline,
      levels,
      oneHost,
      handoff,
      failover,
      openFailures: context.openFailures,
      durationMs: performance.now() - started,
    };
  } finally {
    // What the hosts said last (their stderr names refusals and failures): for whoever reads the run.
    for (const host of hosts?.running() ?? []) {
      const tail = host.output().trim().split("\n").slice(-5).join("\n  ");
      if (tail !== "") options.log(`${host.id} said last:\n  ${tail}`);
      const notices = host.leaseNotices();
      if (notices.length > 0) options.log(`${host.id} on its own lease:\n  ${notices.join("\n  ")}`);
    }
    shards?.close();
    hosts?.killAll();
    await bus?.close().catch(() => undefined);
    await provider?.close().catch(() => undefined);
    await nats?.stop().catch(() => undefined);
    await rm(directory, { recursive: true, force: true });
    process.removeListener("exit", killOnExit);
  }
}

/** Failed chats by reason (an error code, `no reply`, `unparsable`), for the report. */
export type FailureCounts = Record<string, number>;

/** One chat: undefined when answered, else why not. */
async function chatOnce(
  bus: NatsBus,
  session: string,
  text: string,
  timeoutMs: number,
  id?: string,
): Promise<string | undefined> {
  try {
    const request = id === undefined ? { session, text } : { session, text, id };
    const reply = await bus.request(chatSubject(PREFIX, AGENT), JSON.stringify(request), {
      timeoutMs,
    });
    const parsed = parseChatReply(reply.data);
    if (!parsed.ok) return "unparsable";
    return parsed.value.ok ? undefined : parsed.value.error.code;
  } catch {
    return "no reply";
  }
}

function countFailure(counts: FailureCounts, reason: string): void {
  counts[reason] = (counts[reason] ?? 0) + 1;
}

/** `no reply 3, overloaded 2`. */
export function describeFailures(counts: FailureCounts): string {
  return Object.entries(counts)
    .map(([reason, count]) => `${reason} ${count}`)
    .join(", ");
}

const sessionName = (index: number) => `s${index}`;

/** Opens sessions `from … target − 1` with one chat each, `openConcurrency` at a time; returns the failures. */
async function openSessions(context: Context, from: number, target: number): Promise<number> {
  let next = from;
  let failures = 0;
  let lastLog = performance.now();
  const worker = async () => {
    while (next < target) {
      context.check();
      const index = next++;
      const failure = await chatOnce(context.bus, sessionName(index), "hello", 60_000);
      if (failure !== undefined) {
        failures++;
        countFailure(context.openFailures, failure);
      }
      if (performance.now() - lastLog > 10_000) {
        lastLog = performance.now();
        context.options.log(`  opened ${index + 1 - from} of ${target - from} (${failures} failed)`);
      }
    }
  };
  await Promise.all(Array.from({ length: context.options.openConcurrency }, worker));
  return failures;
}

/** Every message stored in the system's streams so far: KV writes, histories, journals, events. */
async function storedMessages(bus: NatsBus): Promise<number> {
  const jsm = await jetstreamManager(bus.connection);
  let total = 0;
  for await (const stream of jsm.streams.list()) total += stream.state.last_seq;
  return total;
}

/** Idle figures over `idleSeconds` once the last chats settled: writes/s, CPU and RSS per process. */
async function measureIdle(
  context: Context,
  sessions: number,
  openFailures: number,
  openRate: number | undefined,
): Promise<LevelFigures> {
  // Chats answered may still have writes behind them (journal compaction, history): let them land.
  // And a host that went quiet gives the burst's memory back with a few full collections, 10 s after
  // its last request, up to 8 a second apart (`--quiet-gc`), each a full collection of a large heap:
  // once, several seconds of CPU.
  // Idle figures are what a host holding its sessions costs from then on, so they start after it.
  await sleep(IDLE_SETTLE_MS);
  context.check();
  const pids = context.hosts.running().map((host) => host.child.pid);
  const natsPid = context.nats.pid;
  const writesBefore = await storedMessages(context.bus);
  const cpuBefore = pids.map(cpuSeconds);
  const natsCpuBefore = cpuSeconds(natsPid);
  const at = performance.now();
  await sleep(context.options.idleSeconds * 1000);
  context.check();
  const seconds = (performance.now() - at) / 1000;
  const writesAfter = await storedMessages(context.bus);
  return {
    sessions,
    openFailures,
    openRate,
    writesPerSecond: (writesAfter - writesBefore) / seconds,
    hosts: pids.map((pid, index) => ({
      rssBytes: rssBytes(pid),
      cpuPercent: ((cpuSeconds(pid) - cpuBefore[index]!) / seconds) * 100,
    })),
    nats: {
      rssBytes: rssBytes(natsPid),
      cpuPercent: ((cpuSeconds(natsPid) - natsCpuBefore) / seconds) * 100,
    },
    chat: undefined,
    sustainedChat: undefined,
    comparedChat: undefined,
  };
}

/** Chats sent at a steady rate to random live sessions; latency from each chat's scheduled time. */
async function measureChats(context: Context, sessions: number, chatRate: number): Promise<ChatFigures> {
  const { chatSeconds } = context.options;
  const total = chatRate * chatSeconds;
  const maxInFlight = Math.max(50, chatRate * 4);
  const latencies: number[] = [];
  let sent = 0;
  let failed = 0;
  const failures: FailureCounts = {};
  let inFlight = 0;
  const pids = context.hosts.running().map((host) => host.child.pid);
  const hostCpu = () => pids.reduce<number>((sum, pid) => sum + cpuSeconds(pid), 0);
  const hostCpuBefore = hostCpu();
  const natsCpuBefore = cpuSeconds(context.nats.pid);
  const start = performance.now();
  const pending: Promise<void>[] = [];
  // The phase lasts `chatSeconds` whatever the rate reached: chats held back by the cap are not sent.
  while (sent < total && performance.now() - start < chatSeconds * 1000) {
    context.check();
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * chatRate));
    // The in-flight cap keeps an overloaded system from piling up unbounded work: the rate drops instead.
    while (sent < due && inFlight < maxInFlight) {
      const scheduled = start + (sent / chatRate) * 1000;
      const session = sessionName(Math.floor(Math.random() * sessions));
      sent++;
      inFlight++;
      pending.push(
        chatOnce(context.bus, session, "again", 30_000).then((failure) => {
          inFlight--;
          if (failure === undefined) latencies.push(performance.now() - scheduled);
          else {
            failed++;
            countFailure(failures, failure);
          }
        }),
      );
    }
    await sleep(5);
  }
  await Promise.all(pending);
  // From the first send to the last answer.
  const elapsed = (performance.now() - start) / 1000;
  latencies.sort((a, b) => a - b);
  return {
    targetRate: chatRate,
    reachedRate: latencies.length / elapsed,
    sent,
    failed,
    failures,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    hostCpuMsPerChat: ((hostCpu() - hostCpuBefore) * 1000) / Math.max(1, latencies.length),
    natsCpuMsPerChat: ((cpuSeconds(context.nats.pid) - natsCpuBefore) * 1000) / Math.max(1, latencies.length),
  };
}

/** Waits until the shard map gives every shard to its preferred host among `members`; ms waited. */
async function waitUntilBalanced(
  context: Context,
  members: readonly ScaleHost[],
  timeoutMs: number,
): Promise<number> {
  const at = performance.now();
  const preferred = assignShards(
    DEFAULT_SHARD_COUNT,
    members.map((host) => host.id),
  );
  for (;;) {
    context.check();
    const owners = context.shards.owners(DEFAULT_SHARD_COUNT);
    if (owners.every((owner, shard) => owner === preferred[shard])) return performance.now() - at;
    if (performance.now() - at > timeoutMs) {
      throw new Error(
        `the shards did not settle on ${members.map((host) => host.id).join(", ")} within ${timeoutMs / 1000} s: ${describeCounts(context.shards.counts(DEFAULT_SHARD_COUNT))}`,
      );
    }
    await sleep(20);
  }
}

/** A fourth host joins (until its shards are handed over to it), then leaves gracefully. */
async function measureHandoff(context: Context): Promise<ScaleReport["handoff"]> {
  const three = context.hosts.running();
  const at = performance.now();
  const fourth = context.hosts.start("h4");
  await waitForHost(context.bus, PREFIX, AGENT, fourth);
  const joinReadyMs = performance.now() - at;
  const joinBalancedMs = joinReadyMs + (await waitUntilBalanced(context, [...three, fourth], 120_000));
  const movedToNew = context.shards.counts(DEFAULT_SHARD_COUNT).get(fourth.id) ?? 0;
  context.options.log(
    `hand-off: h4 answered after ${seconds(joinReadyMs)}, held its ${movedToNew} shards after ${seconds(joinBalancedMs)}`,
  );
  const leaving = performance.now();
  await context.hosts.stop(fourth);
  await waitUntilBalanced(context, three, 120_000);
  const leaveMs = performance.now() - leaving;
  context.options.log(`h4 left gracefully; its shards back with the three after ${seconds(leaveMs)}`);
  return { joinReadyMs, joinBalancedMs, movedToNew, leaveMs };
}

/** SIGKILLs h1; times until no shard names it, and until a sample of its sessions answer again. */
async function measureFailover(
  context: Context,
  sessions: number,
  leaseTtlMs: number,
): Promise<ScaleReport["failover"]> {
  const victim = context.hosts.running().find((host) => host.id === "h1");
  if (victim === undefined) return undefined;
  const owners = context.shards.owners(DEFAULT_SHARD_COUNT);
  const victimShards = owners.filter((owner) => owner === victim.id).length;
  const ofVictim: string[] = [];
  for (let index = 0; index < sessions; index++) {
    const session = sessionName(index);
    if (owners[shardOf(AGENT, session, DEFAULT_SHARD_COUNT)] === victim.id) ofVictim.push(session);
  }
  // An even spread over the victim's sessions, not the first ones opened.
  const step = Math.max(1, Math.floor(ofVictim.length / context.options.sampleSize));
  const sample = ofVictim.filter((_, index) => index % step === 0).slice(0, context.options.sampleSize);
  const deadlineMs = leaseTtlMs + 60_000;
  // As a client should ask: a request lost with the dead host (the server handed it to the host
  // as it died) is noticed only by its timeout, so each waits 5 s and is sent again; one request
  // id per session, so a retry joins the chat already under way instead of running it once more.
  const sampleTimeoutMs = SAMPLE_TIMEOUT_MS;

  victim.child.kill("SIGKILL");
  const killedAt = performance.now();
  context.options.log(
    `killed h1 (${victimShards} shards, ${ofVictim.length} sessions); asking ${sample.length} of them`,
  );
  let lastAnswer = 0;
  let unanswered = 0;
  // Every attempt, ms since the kill: where the time between "re-owned" and "answered" goes.
  const attempts: Attempt[] = [];
  const answering = Promise.all(
    sample.map(async (session) => {
      while (performance.now() - killedAt < deadlineMs) {
        if (context.options.signal.aborted) return;
        const sentMs = performance.now() - killedAt;
        const failure = await chatOnce(
          context.bus,
          session,
          "after the kill",
          sampleTimeoutMs,
          `failover-${session}`,
        );
        const endedMs = performance.now() - killedAt;
        attempts.push({ sentMs, endedMs, outcome: failure ?? "answered" });
        if (failure === undefined) {
          lastAnswer = Math.max(lastAnswer, endedMs);
          return;
        }
        await sleep(100);
      }
      unanswered++;
    }),
  );
  let reownedMs = Number.NaN;
  while (performance.now() - killedAt < deadlineMs) {
    context.check();
    const now = context.shards.owners(DEFAULT_SHARD_COUNT);
    if (now.every((owner) => owner !== undefined && owner !== victim.id)) {
      reownedMs = performance.now() - killedAt;
      break;
    }
    await sleep(20);
  }
  await answering;
  context.check();
  context.options.log(describeAttempts(attempts, reownedMs));
  context.options.log(
    `failover: shards re-owned after ${seconds(reownedMs)}, ${sample.length - unanswered} of ${sample.length} sessions answered${unanswered === sample.length ? "" : ` after ${seconds(lastAnswer)}`}`,
  );
  return {
    victimShards,
    victimSessions: ofVictim.length,
    sample: sample.length,
    reownedMs,
    sampleAnsweredMs: unanswered === sample.length ? Number.NaN : lastAnswer,
    sampleUnanswered: unanswered,
  };
}

/** How long one sampled chat waits for its answer before it is sent again (with the same id). */
const SAMPLE_TIMEOUT_MS = 5_000;

/** One chat of the failover sample: when it was sent and ended (ms since the kill), and how. */
interface Attempt {
  sentMs: number;
  endedMs: number;
  outcome: string;
}

/**
 * The sample's attempts by the second they ended: `10 s: 3 answered, 5 no reply`, then when the
 * answered ones were sent and how long they took, around the moment the shards were re-owned.
 */
function describeAttempts(attempts: readonly Attempt[], reownedMs: number): string {
  const bySecond = new Map<number, FailureCounts>();
  for (const attempt of attempts) {
    const second = Math.floor(attempt.endedMs / 1000);
    const counts = bySecond.get(second) ?? {};
    countFailure(counts, attempt.outcome);
    bySecond.set(second, counts);
  }
  const lines = [...bySecond.entries()]
    .sort(([a], [b]) => a - b)
    .map(([second, counts]) => `    ended in ${second}–${second + 1} s: ${describeFailures(counts)}`);
  const answered = attempts.filter((attempt) => attempt.outcome === "answered");
  const took = answered.map((attempt) => attempt.endedMs - attempt.sentMs).sort((a, b) => a - b);
  const ended = answered.map((attempt) => attempt.endedMs).sort((a, b) => a - b);
  const sentAfter = answered.filter((attempt) => attempt.sentMs >= reownedMs).length;
  return [
    `  failover sample: ${attempts.length} attempts; answers ended at p50 ${seconds(percentile(ended, 50))}, p90 ${seconds(percentile(ended, 90))}, last ${seconds(ended.at(-1) ?? Number.NaN)} (re-owned at ${seconds(reownedMs)}); an answered chat took p50 ${seconds(percentile(took, 50))}, max ${seconds(took.at(-1) ?? Number.NaN)}; ${sentAfter} of ${answered.length} answered chats were sent after the re-owning`,
    ...lines,
  ].join("\n");
}

export function seconds(ms: number): string {
  return Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : "never";
}

export function megabytes(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(0)} MB`;
}

function describeCounts(counts: Map<string, number>): string {
  return [...counts.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([host, count]) => `${host} ${count}`)
    .join(", ");
}

/** `172/s of 500/s: p50 … ms, p99 … ms (0 failed)`. */
export function describeChats(chat: ChatFigures): string {
  const failed = chat.failed === 0 ? "0 failed" : `${chat.failed} failed: ${describeFailures(chat.failures)}`;
  return `${chat.reachedRate.toFixed(0)}/s of ${chat.targetRate}/s: p50 ${chat.p50Ms.toFixed(1)} ms, p99 ${chat.p99Ms.toFixed(1)} ms (${failed}); CPU per chat: hosts ${chat.hostCpuMsPerChat.toFixed(2)} ms, nats-server ${chat.natsCpuMsPerChat.toFixed(2)} ms`;
}

function describeLevel(level: LevelFigures): string {
  const chat = [level.chat, level.sustainedChat, level.comparedChat]
    .filter((figures) => figures !== undefined)
    .map((figures) => `; chats ${describeChats(figures)}`)
    .join("");
  return `${level.sessions} sessions${level.openRate === undefined ? "" : ` (opened at ${level.openRate.toFixed(0)}/s, ${level.openFailures} failed)`}: idle ${level.writesPerSecond.toFixed(1)} JetStream writes/s, hosts RSS ${level.hosts.map((host) => megabytes(host.rssBytes)).join(" / ")}, CPU ${level.hosts.map((host) => `${host.cpuPercent.toFixed(1)} %`).join(" / ")}${chat}`;
}
