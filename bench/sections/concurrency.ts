import { type Row, ratioOf } from "../support/report.js";
import { runWorker } from "../support/run-worker.js";
import type { BenchSettings, SectionResult } from "../support/section.js";
import { single, summarise } from "../support/stats.js";

type Kind = "agentloop" | "xstate" | "plain";

/**
 * §4 concurrency: 1,000 sessions each run a 3-iteration chat (2 tool steps, then text) at once on
 * the zero-latency backend. Throughput: one worker process holds the sessions of all three loops
 * and rotates between them round by round. Peak RSS: one worker per loop (maxRSS is per process)
 * running one round.
 */
export async function benchConcurrency(settings: BenchSettings): Promise<SectionResult> {
  const sessions = settings.isQuick ? 200 : 1_000;
  const runs = settings.isQuick ? 2 : Math.min(settings.runs, 4);
  const kinds: Kind[] = ["agentloop", "xstate", "plain"];
  const throughput = (await runWorker({ task: "concurrency", kinds, sessions, runs })).samples;
  const peakRss = async (kind: Kind) =>
    single((await runWorker({ task: "concurrency", kinds: [kind], sessions, runs: 0 })).peakRssMb);
  const rss = {
    agentloop: await peakRss("agentloop"),
    xstate: await peakRss("xstate"),
    plain: await peakRss("plain"),
  };
  const chatsPerSecond = {
    agentloop: summarise(throughput.agentloop!),
    xstate: summarise(throughput.xstate!),
    plain: summarise(throughput.plain!),
  };
  const label = `${sessions.toLocaleString("en-US")} concurrent 3-iteration chats`;
  const rows: Row[] = [
    {
      metric: `${label}: chats/s vs minimal XState loop`,
      agentloop: chatsPerSecond.agentloop,
      baseline: chatsPerSecond.xstate,
      unit: "chats/s",
      digits: 0,
    },
    {
      metric: `${label}: chats/s vs plain async loop`,
      agentloop: chatsPerSecond.agentloop,
      baseline: chatsPerSecond.plain,
      unit: "chats/s",
      digits: 0,
    },
    {
      metric: `${label}: peak RSS of the process vs minimal XState loop`,
      agentloop: rss.agentloop,
      baseline: rss.xstate,
      unit: "MB",
      digits: 0,
    },
    {
      metric: `${label}: peak RSS of the process vs plain async loop`,
      agentloop: rss.agentloop,
      baseline: rss.plain,
      unit: "MB",
      digits: 0,
    },
  ];
  const ratio = ratioOf(rows[0]!);
  return {
    title: "Concurrency",
    rows,
    targets: [
      {
        target: "1,000 concurrent chats at ≥ 50 % of the minimal XState loop's throughput",
        stands: `${(ratio * 100).toFixed(0)} % (${Math.round(chatsPerSecond.agentloop.median)} vs ${Math.round(chatsPerSecond.xstate.median)} chats/s)`,
        met: ratio >= 0.5,
      },
    ],
    notes: [
      `Concurrency: one worker process creates ${sessions.toLocaleString("en-US")} sessions of each loop (untimed; agentloop's with createAgent, no history), then times all of one loop's chats started at once (Promise.all), events off: one warm-up round per loop, then ${runs} measured rounds rotating between the loops, sessions reset (untimed) before each round. Peak RSS: a fresh worker per loop that creates its sessions and runs one round; its maxRSS over its whole life (module loading included, the same for every loop).`,
    ],
  };
}
