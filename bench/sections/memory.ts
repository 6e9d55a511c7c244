import type { Row } from "../support/report.js";
import { runWorker } from "../support/run-worker.js";
import type { BenchSettings, SectionResult } from "../support/section.js";
import { type Measure, summarise } from "../support/stats.js";

const KB = 1024;
const GIB_IN_KB = 1024 * 1024;

/** How many sessions of `kilobytes` each fit in 1 GiB of heap (the fewest from the largest sample). */
function sessionsPerGiB(kilobytes: Measure): Measure {
  return {
    median: GIB_IN_KB / kilobytes.median,
    min: GIB_IN_KB / kilobytes.max,
    max: GIB_IN_KB / kilobytes.min,
    runs: kilobytes.runs,
  };
}

/**
 * §3 memory: heap per idle session at 10,000 sessions (createAgent with an in-memory history; the
 * host's SessionActor around it) and per chat in flight, each measured in a fresh worker process.
 */
export async function benchMemory(settings: BenchSettings): Promise<SectionResult> {
  const count = settings.isQuick ? 1_000 : 10_000;
  const rounds = settings.isQuick ? 1 : 2;
  const activeCount = settings.isQuick ? 200 : 1_000;
  const idle = async (kind: "agent" | "host" | "xstate-loop" | "xstate-session") =>
    summarise(
      (await runWorker({ task: "idle", kind, count, steps: 5 })).samples[kind]!.map((bytes) => bytes / KB),
    );
  const active = async (kind: "agentloop" | "xstate" | "plain") =>
    summarise(
      (await runWorker({ task: "active", kind, count: activeCount, rounds })).samples[kind]!.map(
        (bytes) => bytes / KB,
      ),
    );

  const agent = await idle("agent");
  const xstateLoop = await idle("xstate-loop");
  const rows: Row[] = [
    {
      metric: `Heap per idle session at ${count.toLocaleString("en-US")}: createAgent + in-memory history vs minimal XState loop session`,
      agentloop: agent,
      baseline: xstateLoop,
      unit: "KB",
      digits: 2,
    },
  ];
  const host = await idle("host");
  const xstateSession = await idle("xstate-session");
  rows.push({
    metric: `Heap per idle host session at ${count.toLocaleString("en-US")}: SessionActor + its agent vs minimal XState loop + mailbox actor`,
    agentloop: host,
    baseline: xstateSession,
    unit: "KB",
    digits: 2,
  });
  rows.push({
    metric:
      "Sessions per process: live idle host sessions in 1 GB of heap (extrapolated: 1 GiB ÷ heap per idle host session) vs minimal XState loop + mailbox actor",
    agentloop: sessionsPerGiB(host),
    baseline: sessionsPerGiB(xstateSession),
    unit: "sessions",
    digits: 0,
  });
  const activeAgentloop = await active("agentloop");
  const activeXState = await active("xstate");
  const activePlain = await active("plain");
  rows.push({
    metric: `Heap per active chat (${activeCount.toLocaleString("en-US")} in flight, held in the 2nd model request) vs minimal XState loop`,
    agentloop: activeAgentloop,
    baseline: activeXState,
    unit: "KB",
    digits: 2,
  });
  return {
    title: "Memory",
    rows,
    targets: [
      {
        target: "≤ 6 KB per idle host session (SessionActor + agent)",
        stands: `${host.median.toFixed(1)} KB, about ${Math.round(sessionsPerGiB(host).median).toLocaleString("en-US")} idle host sessions per GiB of heap`,
        met: host.median <= 6,
      },
      {
        target: "≤ 3 KB per idle agent",
        stands: `${agent.median.toFixed(1)} KB`,
        met: agent.median <= 3,
      },
    ],
    notes: [
      `Memory: each figure comes from a fresh \`node --expose-gc\` worker (bench/worker.ts): 200 warm-up sessions, then the sessions are created and held in 5 equal steps up to ${count.toLocaleString("en-US")}; each step's growth of heapUsed (after a full GC) divided by its sessions is one sample. An idle agent has no chat running; its history is an InMemoryContextHistory. The baseline session is what the minimal XState loop needs per session: a name and an empty message list (its machine, bound once to the backend and tool, is shared by all sessions); the host baseline adds a started actor of a two-state mailbox machine (shared too). A SessionActor starts its mailbox actor at a message and drops it after a second back in idle (\`mailboxLingerMs\`), so an idle host session holds none: that is why it can weigh less than the baseline's.`,
      `Active chats: ${activeCount.toLocaleString("en-US")} sessions each start a 3-iteration chat that the backend holds in its 2nd request; heap measured against the same sessions before the chats started (${rounds} round${rounds === 1 ? "" : "s"} after a warm-up round). A plain async loop holds ${activePlain.median.toFixed(2)} KB per chat at the same point.`,
    ],
  };
}
