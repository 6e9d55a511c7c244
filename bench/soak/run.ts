/**
 * `npm run soak`: the failover soak (see failover-soak.ts) with its own nats-server and three
 * `serve` processes. Flags: `--runs N` (default 50), `--seed S` (default: from the clock; printed,
 * so a run can be replayed), `--hosts N` (default 3), `--points a,b` (the kill points taken in turn;
 * default all), `--write` (puts a "Failover soak" section into BENCHMARKS.md, leaving the rest of
 * the file alone). Exits 1 on any violation.
 */
import { cpus } from "node:os";
import { writeBenchmarksFile } from "../support/benchmarks-file.js";
import { percentile } from "../support/stats.js";
import { KILL_POINTS, type KillPoint, runFailoverSoak, type SoakReport, summarise } from "./failover-soak.js";

const BEGIN = "<!-- soak:begin (written by npm run soak -- --write; edit outside the markers) -->";
const END = "<!-- soak:end -->";

interface Cli {
  runs: number;
  seed: number;
  hosts: number;
  isWriting: boolean;
  retryTimeoutMs: number | undefined;
  points: readonly KillPoint[];
}

function positive(flag: string, value: string | undefined): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1) throw new Error(`${flag} takes a positive whole number`);
  return number;
}

function killPoints(value: string | undefined): KillPoint[] {
  const names = (value ?? "").split(",").filter((name) => name !== "");
  const unknown = names.filter((name) => !(KILL_POINTS as readonly string[]).includes(name));
  if (names.length === 0 || unknown.length > 0) {
    throw new Error(`--points takes kill points separated by commas, of: ${KILL_POINTS.join(", ")}`);
  }
  return names as KillPoint[];
}

function parseCli(args: readonly string[]): Cli {
  const cli: Cli = {
    runs: 50,
    seed: Date.now() % 1_000_000,
    hosts: 3,
    isWriting: false,
    retryTimeoutMs: undefined,
    points: KILL_POINTS,
  };
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    if (arg === "--runs") cli.runs = positive(arg, args[++index]);
    else if (arg === "--seed") cli.seed = positive(arg, args[++index]);
    else if (arg === "--hosts") cli.hosts = positive(arg, args[++index]);
    else if (arg === "--retry-timeout") cli.retryTimeoutMs = positive(arg, args[++index]);
    else if (arg === "--points") cli.points = killPoints(args[++index]);
    else if (arg === "--write") cli.isWriting = true;
    else
      throw new Error(
        `unknown argument ${arg} (flags: --runs N, --seed S, --hosts N, --retry-timeout MS, --points a,b, --write)`,
      );
  }
  if (cli.hosts < 2) throw new Error("--hosts takes at least 2 (a failover needs another host)");
  return cli;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(2)} s`;
}

function section(report: SoakReport, date: Date): string {
  const sorted = [...report.failoverMs].sort((a, b) => a - b);
  const answered = [...report.answeredMs].sort((a, b) => a - b);
  const failover =
    sorted.length === 0
      ? ["| failover p50 / p99 / max | no kill |"]
      : [
          `| failover p50 / p99 / max | ${seconds(percentile(sorted, 50))} / ${seconds(percentile(sorted, 99))} / ${seconds(sorted.at(-1)!)} (limit: lease TTL + 2 s = ${seconds(report.leaseTtlMs + 2000)}) |`,
        ];
  return [
    "## Failover soak",
    "",
    `\`npm run soak -- --runs ${report.runs} --seed ${report.seed} --write\`, ${date.toISOString().slice(0, 16).replace("T", " ")} UTC, Node ${process.version}, ${cpus()[0]?.model ?? "unknown CPU"} (${cpus().length} cores).`,
    `${report.hosts} \`serve --history nats --lease-ttl ${report.leaseTtlMs}ms\` processes on one nats-server, the fake provider streaming slowly; each run kills the session's owner with SIGKILL at a random moment of its kill point, starts a replacement host and retries every unanswered id. In a hand-off run a fourth host joins while the session's chats run on a shard that moves to it; the old owner is killed while it drains the shard (handoff-old), or the joiner right after it took the shard, with requests waiting (handoff-new).`,
    "",
    "| figure | value |",
    "| --- | --- |",
    `| runs | ${report.runs} (${seconds(report.durationMs)}) |`,
    `| kills: ${KILL_POINTS.join(" / ")} | ${KILL_POINTS.map((point) => report.kills[point]).join(" / ")} (kill point missed: ${report.missedKills}) |`,
    ...KILL_POINTS.map((point) => {
      const sorted = [...report.failoverMsByPoint[point]].sort((a, b) => a - b);
      const failover =
        sorted.length === 0
          ? "no failover"
          : `${seconds(percentile(sorted, 50))} / ${seconds(sorted.at(-1)!)}`;
      return `| ${point}: violations, failover p50 / max | ${report.violationsByPoint[point]}, ${failover} |`;
    }),
    `| requests with an id / answered | ${report.requests} / ${report.answered} |`,
    `| replies / retries | ${report.replies} / ${report.retries} |`,
    `| no reply (timed out, then retried): first attempts / retries | ${report.unansweredFirstAttempts} / ${report.lostRetries} |`,
    `| chats resumed / tool calls in doubt | ${report.resumed} / ${report.inDoubt} |`,
    `| non-idempotent tool runs | ${report.toolRuns} |`,
    ...failover,
    ...(answered.length === 0
      ? []
      : [
          `| kill to every id of the run answered, p50 / p99 / max (retry timeout ${seconds(report.retryTimeoutMs)}) | ${seconds(percentile(answered, 50))} / ${seconds(percentile(answered, 99))} / ${seconds(answered.at(-1)!)} |`,
        ]),
    `| violations | ${report.violations.length} |`,
    ...(report.violations.length === 0
      ? []
      : ["", "Violations (first 10):", "", ...report.violations.slice(0, 10).map((text) => `- ${text}`)]),
  ].join("\n");
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  const date = new Date();
  console.log(
    `failover soak: ${cli.runs} runs, seed ${cli.seed}, ${cli.hosts} hosts, kill points ${cli.points.join(", ")}`,
  );
  const report = await runFailoverSoak({
    runs: cli.runs,
    seed: cli.seed,
    hosts: cli.hosts,
    ...(cli.retryTimeoutMs === undefined ? {} : { retryTimeoutMs: cli.retryTimeoutMs }),
    points: cli.points,
    log: (line) => console.log(line),
  });
  for (const line of summarise(report)) console.log(line);
  if (cli.isWriting) {
    writeBenchmarksFile("BENCHMARKS.md", section(report, date), { begin: BEGIN, end: END });
    console.log("wrote the Failover soak section of BENCHMARKS.md");
  }
  if (report.violations.length > 0) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(`soak: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
