import { type Row, ratioOf } from "../support/report.js";
import { runWorker } from "../support/run-worker.js";
import type { BenchSettings, SectionResult } from "../support/section.js";
import { single, summarise } from "../support/stats.js";

type Kind = "agentloop" | "xstate" | "shaped" | "plain";

/** The streaming row: conversations at once, each a fresh session of 11 iterations × 20 deltas. */
const STREAMING_CONVERSATIONS = 100;
const STREAMING_TOOL_STEPS = 10;

/**
 * §4 concurrency: 1,000 sessions each run a 3-iteration chat (2 tool steps, then text) at once on
 * the zero-latency backend. Throughput: one worker process holds the sessions of all three loops
 * and rotates between them round by round. The shaped baseline (bench/workload/shaped-xstate-loop.ts) is
 * the loop's shape as the design asks for it (a chat machine invoking one iteration machine per turn) with nothing else: what it costs above the minimal loop is the
 * price of the shape. Peak RSS: one worker per loop (maxRSS is per process)
 * running one round.
 */
export async function benchConcurrency(settings: BenchSettings): Promise<SectionResult> {
  const sessions = settings.isQuick ? 200 : 1_000;
  const runs = settings.isQuick ? 2 : Math.min(settings.runs, 4);
  const kinds: Kind[] = ["agentloop", "xstate", "shaped", "plain"];
  const throughput = (await runWorker({ task: "concurrency", kinds, sessions, runs })).samples;
  const streaming = (
    await runWorker({
      task: "concurrency",
      kinds: ["agentloop", "xstate"],
      sessions: STREAMING_CONVERSATIONS,
      runs: settings.isQuick ? 2 : settings.runs,
      toolSteps: STREAMING_TOOL_STEPS,
      isFresh: true,
    })
  ).samples;
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
    shaped: summarise(throughput.shaped!),
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
      metric: `${label}: chats/s vs agentloop's chart shape on bare XState (chat machine, an iteration machine per iteration, stream and tool actors)`,
      agentloop: chatsPerSecond.agentloop,
      baseline: chatsPerSecond.shaped,
      unit: "chats/s",
      digits: 0,
    },
    {
      metric: `${label}: agentloop's chart shape on bare XState (agentloop column) vs minimal XState loop, chats/s`,
      agentloop: chatsPerSecond.shaped,
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
    {
      metric: `${STREAMING_CONVERSATIONS} concurrent streaming conversations (fresh session each, ${STREAMING_TOOL_STEPS + 1} iterations × 20 deltas): conversations/s vs minimal XState loop`,
      agentloop: summarise(streaming.agentloop!),
      baseline: summarise(streaming.xstate!),
      unit: "conv/s",
      digits: 0,
    },
  ];
  const ratio = ratioOf(rows[0]!);
  const shapeRatio = ratioOf(rows[2]!);
  return {
    title: "Concurrency",
    rows,
    targets: [
      {
        target: "1,000 concurrent chats at ≥ 60 % of the minimal XState loop's throughput",
        stands: `${(ratio * 100).toFixed(0)} % (${Math.round(chatsPerSecond.agentloop.median)} vs ${Math.round(chatsPerSecond.xstate.median)} chats/s); agentloop's chart shape alone on bare XState reaches ${(shapeRatio * 100).toFixed(0)} %, agentloop is at ${((ratio / shapeRatio) * 100).toFixed(0)} % of that shape`,
        met: ratio >= 0.6,
      },
    ],
    notes: [
      `Concurrency: one worker process creates ${sessions.toLocaleString("en-US")} sessions of each loop (untimed; agentloop's with createAgent, no history), then times all of one loop's chats started at once (Promise.all), events off: one warm-up round per loop, then ${runs} measured rounds rotating between the loops, sessions reset (untimed) before each round. Peak RSS: a fresh worker per loop that creates its sessions and runs one round; its maxRSS over its whole life (module loading included, the same for every loop).`,
      `Streaming conversations: ${STREAMING_CONVERSATIONS} conversations started at once in a worker, each creating its session inside the timing (createAgent, no history; the minimal XState loop's session is a name), running one chat of ${STREAMING_TOOL_STEPS} tool steps then text, every response streaming 20 text deltas, and dropping the session; events off. One warm-up round per loop, then the measured rounds alternate.`,
    ],
  };
}
