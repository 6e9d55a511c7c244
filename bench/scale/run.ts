/**
 * `npm run scale`: live sessions by the ten thousand across three `serve --history nats` hosts
 * (see scale-run.ts). Flags: `--sessions 10000,50000,100000` (the levels, ascending), `--quick`
 * (levels 1000,3000, short phases), `--rate N` (chats/s of the latency phase, default 500),
 * `--lease-ttl MS` (default the hosts' 10 s), `--failover-only` (no chat phases, no hand-off), `--write` (puts a "Scale" section into BENCHMARKS.md,
 * leaving the rest alone). Ctrl-C stops every process the run started.
 */
import { cpus, loadavg, totalmem } from "node:os";
import { writeBenchmarksFile } from "../support/benchmarks-file.js";
import {
  BASELINE_SESSIONS,
  describeChats,
  describeFailures,
  IDLE_SETTLE_MS,
  type LevelFigures,
  megabytes,
  oneHostRate,
  runScale,
  ScaleAbortedError,
  type ScaleReport,
  seconds,
} from "./scale-run.js";

const BEGIN = "<!-- scale:begin (written by npm run scale -- --write; edit outside the markers) -->";
const END = "<!-- scale:end -->";

interface Cli {
  levels: number[];
  isQuick: boolean;
  rate: number;
  leaseTtlMs: number | undefined;
  isWriting: boolean;
  isFailoverOnly: boolean;
  args: string;
}

const FLAGS = "--sessions N,N,…, --quick, --rate N, --lease-ttl MS, --failover-only, --write";

function positive(flag: string, value: string | undefined): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1)
    throw new Error(`${flag} takes a positive whole number, got ${value}`);
  return number;
}

function parseCli(args: readonly string[]): Cli {
  const cli: Cli = {
    levels: [10_000, 50_000, 100_000],
    isQuick: false,
    rate: 500,
    leaseTtlMs: undefined,
    isWriting: false,
    isFailoverOnly: false,
    args: args.join(" "),
  };
  let levels: number[] | undefined;
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    if (arg === "--sessions") {
      levels = (args[++index] ?? "")
        .split(",")
        .map((part) => positive("--sessions", part.replaceAll("_", "")));
    } else if (arg === "--quick") cli.isQuick = true;
    else if (arg === "--rate") cli.rate = positive(arg, args[++index]);
    else if (arg === "--lease-ttl") cli.leaseTtlMs = positive(arg, args[++index]);
    else if (arg === "--write") cli.isWriting = true;
    else if (arg === "--failover-only") cli.isFailoverOnly = true;
    else throw new Error(`unknown argument ${arg} (flags: ${FLAGS})`);
  }
  cli.levels = levels ?? (cli.isQuick ? [1_000, 3_000] : cli.levels);
  for (const [index, level] of cli.levels.entries()) {
    if (level <= BASELINE_SESSIONS || (index > 0 && level <= cli.levels[index - 1]!)) {
      throw new Error(
        `--sessions takes ascending levels above ${BASELINE_SESSIONS}, got ${cli.levels.join(",")}`,
      );
    }
  }
  return cli;
}

/** Bytes of RSS each live idle session adds, from the baseline to `level` (all hosts together). */
function bytesPerSession(report: ScaleReport, level: LevelFigures): number {
  const total = (figures: LevelFigures) => figures.hosts.reduce((sum, host) => sum + host.rssBytes, 0);
  return (total(level) - total(report.baseline)) / (level.sessions - report.baseline.sessions);
}

const verdict = (isMet: boolean) => (isMet ? "met" : "**not met**");

/**
 * The latency target: the target rate across three hosts, their p99 within 3× the p50 of one host
 * under the same load. When the machine cannot carry the target rate, the same comparison at the
 * rate one host sustained says whether spreading chats over hosts (forwarding, shard routing) costs
 * latency, and the rate row says the target was not reached.
 */
function chatTarget(report: ScaleReport, top: LevelFigures): string {
  const { chat } = top;
  const { oneHost } = report;
  if (chat === undefined || oneHost === undefined)
    return `| ${chat?.targetRate ?? 500} chats/s across 3 hosts | not measured | — |`;
  const atTarget = chat.reachedRate >= 0.95 * chat.targetRate;
  const compared = oneHostRate(oneHost);
  const three = [chat, top.sustainedChat, top.comparedChat].find(
    (figures) => figures?.targetRate === compared.targetRate,
  );
  const ratio = three === undefined ? Number.NaN : three.p99Ms / compared.p50Ms;
  const comparison =
    three === undefined
      ? "no three-host phase at the one host's rate"
      : `at ${compared.targetRate}/s: three hosts p99 ${three.p99Ms.toFixed(1)} ms (${three.failed} failed) vs one host p50 ${compared.p50Ms.toFixed(1)} ms: ${ratio.toFixed(2)}×`;
  const oneHostReached = `one host alone answered ${oneHost.chat.reachedRate.toFixed(0)}/s of ${oneHost.chat.targetRate}/s`;
  return `| ${chat.targetRate} chats/s across 3 hosts, p99 ≤ 3× p50 of one host | three hosts answered ${chat.reachedRate.toFixed(0)}/s of ${chat.targetRate}/s, ${oneHostReached}; ${comparison} | ${verdict(atTarget)} (rate); ${verdict(ratio <= 3)} (p99 ≤ 3× p50${atTarget ? "" : `, at ${compared.targetRate}/s`}) |`;
}

function section(report: ScaleReport, cli: Cli, date: Date, loadBefore: readonly number[]): string {
  const load = (figures: readonly number[]) => figures.map((figure) => figure.toFixed(1)).join(" / ");
  const top = report.levels.at(-1)!;
  const ttl = report.leaseTtlMs;
  const levelRows = [report.baseline, ...report.levels].map((level) => {
    const perSession =
      level === report.baseline ? "—" : `${(bytesPerSession(report, level) / 1024).toFixed(1)} KB`;
    const chat =
      level.chat === undefined
        ? "—"
        : [level.chat, level.sustainedChat]
            .filter((figures) => figures !== undefined)
            .map(describeChats)
            .join("; ");
    return `| ${level.sessions.toLocaleString("en")} | ${level.openRate === undefined ? "—" : `${level.openRate.toFixed(0)}/s (${level.openFailures} failed)`} | ${level.writesPerSecond.toFixed(1)} | ${level.hosts.map((host) => megabytes(host.rssBytes)).join(" / ")} | ${perSession} | ${level.hosts.map((host) => `${host.cpuPercent.toFixed(1)} %`).join(" / ")} | ${megabytes(level.nats.rssBytes)}, ${level.nats.cpuPercent.toFixed(1)} % | ${chat} |`;
  });
  const writesRatio = top.writesPerSecond / Math.max(report.baseline.writesPerSecond, Number.EPSILON);
  const maxCpu = Math.max(...top.hosts.map((host) => host.cpuPercent));
  const perSession = bytesPerSession(report, top);
  const { failover, handoff } = report;
  const ofTarget =
    top.sessions >= 100_000
      ? ""
      : ` (measured at ${top.sessions.toLocaleString("en")}, the target names 100,000)`;
  const targets = [
    `| idle JetStream writes/s at the top level ≤ 1.2× the figure at ${BASELINE_SESSIONS} | ${top.writesPerSecond.toFixed(1)} vs ${report.baseline.writesPerSecond.toFixed(1)} (${writesRatio.toFixed(2)}×)${ofTarget} | ${verdict(writesRatio <= 1.2)} |`,
    `| idle host CPU ≤ 5 % of a core | at most ${maxCpu.toFixed(1)} %${ofTarget} | ${verdict(maxCpu <= 5)} |`,
    `| RSS per live idle session ≤ 5 KB | ${(perSession / 1024).toFixed(1)} KB${ofTarget} | ${verdict(perSession <= 5 * 1024)} |`,
    chatTarget(report, top),
    failover === undefined
      ? "| failover | not measured | — |"
      : `| every shard of the killed host re-owned ≤ TTL + 2 s = ${seconds(ttl + 2000)} | ${seconds(failover.reownedMs)} (${failover.victimShards} shards, ${failover.victimSessions.toLocaleString("en")} sessions) | ${verdict(failover.reownedMs <= ttl + 2000)} |`,
    failover === undefined
      ? ""
      : `| a sample of its sessions answers ≤ TTL + 3 s = ${seconds(ttl + 3000)} | ${failover.sample - failover.sampleUnanswered} of ${failover.sample} answered after ${seconds(failover.sampleAnsweredMs)} | ${verdict(failover.sampleUnanswered === 0 && failover.sampleAnsweredMs <= ttl + 3000)} |`,
  ].filter((row) => row !== "");
  return [
    "## Scale",
    "",
    `\`npm run scale -- ${cli.args}\`, ${date.toISOString().slice(0, 16).replace("T", " ")} UTC, Node ${process.version}, ${cpus()[0]?.model ?? "unknown CPU"} (${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(0)} GiB; load average 1/5/15 min ${load(loadBefore)} before, ${load(loadavg())} after), ${seconds(report.durationMs)} in all.`,
    `Three \`agentloop serve --history nats --lease-ttl ${ttl}ms\` processes (dist/, ${report.shardCount} shards) on one private nats-server with JetStream, a zero-latency fake provider (one text delta per answer). Sessions are opened by one short chat each (64 in flight) and stay live and idle; at each level the idle figures are taken over 10 s, starting ${seconds(IDLE_SETTLE_MS)} after the last chat (past the hosts' quiet collection, which gives the burst's memory back once, 10 s after the last request), then chats go to random live sessions at a steady rate for 10 s (latency from each chat's scheduled send time; at most 4 s of chats in flight, so an overloaded run shows a lower rate rather than an unbounded queue); when the target rate is not reached, a second phase runs at 70 % of the rate reached, a load the hosts sustain. Before the other two hosts start, the first one alone runs the same chat phases over the baseline's sessions, the figure the three hosts' p99 is compared with; each level then also runs the three hosts at the rate one host sustained. Writes/s: the growth of every JetStream stream's last sequence while idle. RSS per session: the three hosts' RSS growth over the ${BASELINE_SESSIONS}-session baseline, divided by the sessions added.`,
    "",
    "| live sessions | opened at | idle JetStream writes/s | host RSS | RSS per added session | idle host CPU (of one core) | nats-server RSS, CPU | chats at a steady rate |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ...levelRows,
    "",
    Object.keys(report.openFailures).length === 0
      ? ""
      : `Sessions that failed to open, by reason: ${describeFailures(report.openFailures)}.`,
    "",
    handoff === undefined
      ? ""
      : `Hand-off: a fourth host answered ${seconds(handoff.joinReadyMs)} after it was started and held its ${handoff.movedToNew} shards (each drained and released by its old owner) ${seconds(handoff.joinBalancedMs)} after it was started; after its graceful leave (SIGTERM) the three held every shard again within ${seconds(handoff.leaveMs)}.`,
    failover === undefined
      ? ""
      : `Failover: SIGKILL of a host holding ${failover.victimShards} shards and ${failover.victimSessions.toLocaleString("en")} live sessions; the shard map is watched until no shard names it, while ${failover.sample} of its sessions are asked a chat each (one request id per session, so a retry joins the chat under way; each request waits 5 s, then is sent again, or 100 ms after an error) until answered.`,
    "",
    "| target | figure | |",
    "| --- | --- | --- |",
    ...targets,
  ]
    .filter((line, index, lines) => !(line === "" && lines[index - 1] === ""))
    .join("\n");
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  const date = new Date();
  const loadBefore = loadavg();
  const interrupt = new AbortController();
  // First Ctrl-C: stop at the next step and clean up; a second one exits at once (hosts killed at exit).
  const onSignal = () => {
    if (interrupt.signal.aborted) process.exit(130);
    console.log("scale: interrupted, stopping every process it started…");
    interrupt.abort();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  console.log(`scale: levels ${cli.levels.join(", ")} sessions, ${cli.rate} chats/s`);
  const report = await runScale({
    levels: cli.levels,
    chatRate: cli.rate,
    chatSeconds: cli.isQuick ? 4 : 10,
    idleSeconds: cli.isQuick ? 5 : 10,
    openConcurrency: 64,
    sampleSize: 200,
    isFailoverOnly: cli.isFailoverOnly,
    ...(cli.leaseTtlMs === undefined ? {} : { leaseTtlMs: cli.leaseTtlMs }),
    signal: interrupt.signal,
    log: (line) => console.log(line),
  });
  const text = section(report, cli, date, loadBefore);
  console.log(`\n${text}\n`);
  if (cli.isWriting) {
    writeBenchmarksFile("BENCHMARKS.md", text, { begin: BEGIN, end: END });
    console.log("wrote the Scale section of BENCHMARKS.md");
  }
}

main().catch((error: unknown) => {
  if (error instanceof ScaleAbortedError) {
    process.exitCode = 130;
    return;
  }
  console.error(`scale: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
