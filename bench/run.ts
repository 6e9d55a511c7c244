/**
 * `npm run bench`: every figure beside its baseline, measured in the same run, printed
 * as one markdown table and written to BENCHMARKS.md with the date, Node version and CPU model.
 *
 * Flags: `--quick` (smaller sizes, a smoke run), `--only loop,events,memory,serve-rss,concurrency,history,history-nats,durable,bus`
 * (those sections; BENCHMARKS.md is then left alone), `--runs N` (measured runs per figure),
 * `--no-write`. Profile a section with `node --cpu-prof dist/bench/run.js --only loop --no-write`.
 */
import { cpus, loadavg } from "node:os";
import { benchBusComparison } from "./sections/bus-comparison.js";
import { benchConcurrency } from "./sections/concurrency.js";
import { benchDurable } from "./sections/durable.js";
import { benchEventPublishing } from "./sections/event-publishing.js";
import { benchHistory } from "./sections/history.js";
import { benchLoopOverhead } from "./sections/loop-overhead.js";
import { benchMemory } from "./sections/memory.js";
import { benchNatsHistory } from "./sections/nats-history.js";
import { benchServeRss } from "./sections/serve-rss.js";
import { writeBenchmarksFile } from "./support/benchmarks-file.js";
import { nowMs } from "./support/clock.js";
import { startNatsServer } from "./support/nats-server.js";
import { renderTable } from "./support/report.js";
import type { BenchSettings, SectionResult } from "./support/section.js";

const SECTIONS = {
  loop: benchLoopOverhead,
  events: benchEventPublishing,
  memory: benchMemory,
  "serve-rss": benchServeRss,
  concurrency: benchConcurrency,
  history: benchHistory,
  "history-nats": benchNatsHistory,
  durable: benchDurable,
  bus: benchBusComparison,
} satisfies Record<string, (settings: BenchSettings) => Promise<SectionResult>>;

type SectionName = keyof typeof SECTIONS;

interface Cli {
  isQuick: boolean;
  only: SectionName[] | undefined;
  runs: number | undefined;
  isWriting: boolean;
}

function parseCli(args: readonly string[]): Cli {
  const cli: Cli = { isQuick: false, only: undefined, runs: undefined, isWriting: true };
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    if (arg === "--quick") cli.isQuick = true;
    else if (arg === "--no-write") cli.isWriting = false;
    else if (arg === "--runs") cli.runs = Number.parseInt(args[++index] ?? "", 10);
    else if (arg === "--only") {
      const names = (args[++index] ?? "").split(",").filter((name) => name !== "");
      const unknown = names.filter((name) => !(name in SECTIONS));
      if (unknown.length > 0 || names.length === 0) {
        throw new Error(
          `--only takes a list of: ${Object.keys(SECTIONS).join(", ")} (got ${unknown.join(", ")})`,
        );
      }
      cli.only = names as SectionName[];
    } else throw new Error(`unknown argument ${arg}`);
  }
  if (cli.runs !== undefined && !(cli.runs >= 1)) throw new Error("--runs takes a positive number");
  return cli;
}

function formatLoad(load: readonly number[]): string {
  return load.map((value) => value.toFixed(2)).join(" / ");
}

async function main(): Promise<void> {
  const cli = parseCli(process.argv.slice(2));
  const startedAt = new Date();
  const loadBefore = loadavg();
  const started = nowMs();
  const server = await startNatsServer();
  const settings: BenchSettings = {
    natsUrl: server.url,
    runs: cli.runs ?? (cli.isQuick ? 3 : 7),
    warmups: cli.isQuick ? 1 : 2,
    isQuick: cli.isQuick,
  };
  const results: SectionResult[] = [];
  try {
    for (const name of cli.only ?? (Object.keys(SECTIONS) as SectionName[])) {
      const sectionStart = nowMs();
      process.stderr.write(`bench: ${name}…`);
      results.push(await SECTIONS[name](settings));
      process.stderr.write(` ${((nowMs() - sectionStart) / 1000).toFixed(1)} s\n`);
    }
  } finally {
    await server.stop();
  }
  const seconds = (nowMs() - started) / 1000;
  const cpu = cpus();
  const environment = [
    `- Date: ${startedAt.toISOString()}`,
    `- Node ${process.version} on ${process.platform}/${process.arch}; CPU: ${cpu[0]?.model ?? "unknown"} × ${cpu.length}`,
    `- Load average (1/5/15 min) before: ${formatLoad(loadBefore)}, after: ${formatLoad(loadavg())}`,
    `- ${settings.runs} measured runs per figure after ${settings.warmups} warm-up round(s)${cli.isQuick ? " (--quick: reduced sizes)" : ""}; whole run ${seconds.toFixed(0)} s`,
  ].join("\n");
  const table = renderTable(results.flatMap((result) => result.rows));
  const targets = results
    .flatMap((result) => result.targets)
    .map((check) => `- ${check.met ? "✅ met" : "❌ not met"} — ${check.target}: ${check.stands}`)
    .join("\n");
  const notes = results
    .flatMap((result) => result.notes)
    .map((note) => `- ${note}`)
    .join("\n");
  const generated = [
    "## Results",
    environment,
    "Each cell: the median, then (min–max) over the runs. Ratio = agentloop ÷ baseline (for µs, KB and MB lower is better; for /s and sessions higher is better).",
    table,
    "## Targets",
    targets,
    "## How each figure is measured",
    notes,
  ].join("\n\n");

  console.log(table);
  console.log(`\n${targets}`);
  console.log(
    `\n${seconds.toFixed(0)} s; Node ${process.version}; ${cpu[0]?.model ?? "unknown CPU"} × ${cpu.length}`,
  );
  if (cli.isWriting && cli.only === undefined) {
    writeBenchmarksFile(new URL("../../BENCHMARKS.md", import.meta.url).pathname, generated);
    console.log("written to BENCHMARKS.md");
  }
}

await main();
