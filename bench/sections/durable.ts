import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { fenceHistory, fenceLlm, type LeaseFence } from "../../src/cluster/lease-fence.js";
import { RequestDedupe } from "../../src/cluster/request-dedupe.js";
import { openAgentDatabase } from "../../src/context/agent-database.js";
import { NatsHistoryStore } from "../../src/context/nats-history-store.js";
import { SqliteContextHistory } from "../../src/context/sqlite-context-history.js";
import { startHost } from "../../src/host/start-host.js";
import { KvChatJournal } from "../../src/journal/kv-chat-journal.js";
import { SessionJournal } from "../../src/journal/session-journal.js";
import { SqliteChatJournal } from "../../src/journal/sqlite-chat-journal.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import { nowMs } from "../support/clock.js";
import { forceGc } from "../support/force-gc.js";
import type { Row } from "../support/report.js";
import type { BenchSettings, SectionResult } from "../support/section.js";
import { type Measure, percentile, summarise } from "../support/stats.js";
import { createBenchAgent } from "../workload/bench-agent.js";
import { BENCH_TOOL_ARGUMENTS, benchTool, benchToolSet } from "../workload/bench-tool.js";
import { ZeroLatencyBackend } from "../workload/zero-latency-backend.js";

/** The loop rows' scenario: 10 tool steps of 20 deltas each, then the answer. */
const TOOL_STEPS = 10;
const STEPS_PER_CHAT = TOOL_STEPS + 1;
/** The end-to-end chat: three tool steps, then the answer. */
const E2E_TOOL_STEPS = 3;

/** One way of running a chat, with the times at which each of its model requests began. */
interface DurableVariant {
  /** Builds a fresh session (untimed); its `chat` is timed. */
  prepare(): Promise<() => Promise<unknown>>;
  /** Model request start times of the chat in progress (filled by the variant's backend). */
  stamps: number[];
}

/** Per-chat and per-step durations (ms) gathered over the measured rounds. */
interface Samples {
  chats: number[];
  steps: number[];
  /** µs per step of each round (chat time ÷ steps): the figure's spread. */
  rounds: number[];
  /** CPU µs of this process per step of each round: what the machine's other load changes least. */
  cpu: number[];
}

function stampingBackend(stamps: number[], toolSteps: number): ZeroLatencyBackend {
  return new ZeroLatencyBackend({
    toolSteps,
    toolName: benchTool.definition.name,
    toolArguments: BENCH_TOOL_ARGUMENTS,
    beforeStep: () => {
      stamps.push(nowMs());
    },
  });
}

/**
 * Times `chats` chats of a variant, each on a fresh session: a step runs from one model request's
 * start to the next's (the first from the chat's start, the last to its end), so what a step
 * writes (journal records, the tool-start mark) falls in the step that wrote it.
 */
async function timeChats(
  variant: DurableVariant,
  chats: number,
  samples: Samples | undefined,
): Promise<void> {
  let total = 0;
  let cpu = 0;
  for (let index = 0; index < chats; index++) {
    const chat = await variant.prepare();
    variant.stamps.length = 0;
    const cpuBefore = process.cpuUsage();
    const start = nowMs();
    await chat();
    const end = nowMs();
    const used = process.cpuUsage(cpuBefore);
    cpu += used.user + used.system;
    total += end - start;
    if (samples === undefined) continue;
    samples.chats.push(end - start);
    const bounds = [start, ...variant.stamps.slice(1), end];
    for (let step = 1; step < bounds.length; step++) samples.steps.push(bounds[step]! - bounds[step - 1]!);
  }
  samples?.rounds.push((total * 1000) / (chats * STEPS_PER_CHAT));
  samples?.cpu.push(cpu / (chats * STEPS_PER_CHAT));
}

function p(values: readonly number[], rank: number): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    rank,
  );
}

/** A figure over every sample of every round (the spread is the samples'). */
function overall(values: readonly number[], rank: number, scale = 1000): Measure {
  return {
    median: p(values, rank) * scale,
    min: p(values, rank) * scale,
    max: p(values, rank) * scale,
    runs: 1,
  };
}

/**
 * The durable path, in the loop rows' scenario: agentloop's chat with nothing stored (the loop
 * rows), with the SQLite history and journal (`--db`), and with what `--history nats` adds on a
 * local nats-server (R1): the JetStream history, the KV journal, the request dedupe around the
 * chat and the lease fence on every write and model request. Then one chat end to end: a request
 * over NATS to a host (startHost, as `serve` runs it) and its reply, three tool steps.
 */
export async function benchDurable(settings: BenchSettings): Promise<SectionResult> {
  const dir = mkdtempSync(join(tmpdir(), "agentloop-bench-durable-"));
  const bus = await NatsBus.connect({ url: settings.natsUrl, name: "agentloop-bench-durable" });
  const prefix = `benchdurable${Date.now()}`;
  let session = 0;
  try {
    const database = openAgentDatabase(join(dir, "agentloop.db"));
    const sqliteJournal = new SqliteChatJournal(database);
    const natsHistories = await NatsHistoryStore.open(bus.connection, { prefix });
    const kvJournal = await KvChatJournal.open(bus.connection, { bucket: `${prefix.toUpperCase()}_JOURNAL` });
    const dedupe = await RequestDedupe.open(bus.connection, { prefix, hostId: "bench" });
    // The lease's fence as a host runs it: a clock read against the local deadline.
    const deadline = Date.now() + 3_600_000;
    const fence: LeaseFence = {
      epoch: 1,
      assertHeld: () => {
        if (Date.now() > deadline) throw new Error("the bench's lease ran out");
      },
    };

    const variant = (build: (stamps: number[]) => DurableVariant["prepare"]): DurableVariant => {
      const stamps: number[] = [];
      return { stamps, prepare: build(stamps) };
    };
    const variants = {
      memory: variant((stamps) => {
        const llm = new RetryingLlmClient({ backend: stampingBackend(stamps, TOOL_STEPS) });
        return async () => {
          const agent = await createBenchAgent({ llm, session: `m${session++}` });
          return () => agent.chat("hello");
        };
      }),
      sqlite: variant((stamps) => {
        const llm = new RetryingLlmClient({ backend: stampingBackend(stamps, TOOL_STEPS) });
        return async () => {
          const name = `q${session++}`;
          const agent = await createBenchAgent({
            llm,
            session: name,
            history: new SqliteContextHistory({ database, agent: "bench", session: name }),
            journal: sqliteJournal,
          });
          return async () => {
            const result = await agent.chat("hello", { requestId: name });
            agent.journal?.forgetAnswer(name);
            await agent.journal?.flush();
            return result;
          };
        };
      }),
      jetstream: variant((stamps) => {
        const llm = fenceLlm(new RetryingLlmClient({ backend: stampingBackend(stamps, TOOL_STEPS) }), fence);
        return async () => {
          const name = `n${session++}`;
          const agent = await createBenchAgent({
            llm,
            session: name,
            history: fenceHistory(natsHistories.history("bench", name), fence),
            journal: kvJournal,
          });
          // As the host answers a chat with an id: dedupe begin, the chat, dedupe finish, then the
          // journal forgets the answer (its reply is stored) and is removed.
          return async () => {
            const reply = await dedupe.answer("bench", name, name, async () => {
              const result = await agent.chat("hello", { requestId: name });
              return {
                reply: { ok: true, session: name, result: result.result, usage: result.usage },
                ran: true,
              };
            });
            agent.journal?.forgetAnswer(name);
            await agent.journal?.flush();
            return reply;
          };
        };
      }),
    };

    // Every variant must really run the whole chat, and leave no journal behind.
    const checked = await (await variants.jetstream.prepare())();
    if (!(checked as { ok?: boolean }).ok)
      throw new Error(`durable bench: the JetStream chat failed: ${JSON.stringify(checked)}`);
    if ((await kvJournal.list()).length !== 0)
      throw new Error("durable bench: a finished chat left its journal records");
    if ((await sqliteJournal.list()).length !== 0)
      throw new Error("durable bench: a SQLite journal was left");

    const chats = settings.isQuick ? 5 : 30;
    const samples = {
      memory: { chats: [], steps: [], rounds: [], cpu: [] } as Samples,
      sqlite: { chats: [], steps: [], rounds: [], cpu: [] } as Samples,
      jetstream: { chats: [], steps: [], rounds: [], cpu: [] } as Samples,
    };
    const names = Object.keys(variants) as (keyof typeof variants)[];
    for (let round = 0; round < settings.warmups; round++) {
      for (const name of names) await timeChats(variants[name], chats, undefined);
    }
    for (let round = 0; round < settings.runs; round++) {
      for (let offset = 0; offset < names.length; offset++) {
        const name = names[(round + offset) % names.length]!;
        forceGc();
        await timeChats(variants[name], chats, samples[name]);
      }
    }

    // End to end: a host as `serve` runs it, a client on its own connection, request → reply.
    const e2e = await benchEndToEnd(settings, prefix);
    const longChat = await benchLongChatJournal(settings);

    const perStep = (name: keyof typeof samples) => summarise(samples[name].rounds);
    const cpuPerStep = (name: keyof typeof samples) => summarise(samples[name].cpu);
    const rows: Row[] = [
      {
        metric:
          "Durable, SQLite history + journal (`--db`): CPU µs per step (this process) vs the in-memory loop",
        agentloop: cpuPerStep("sqlite"),
        baseline: cpuPerStep("memory"),
        unit: "µs",
        digits: 1,
      },
      {
        metric:
          "Durable, `--history nats`: CPU µs per step (this process, the server's excluded) vs the in-memory loop",
        agentloop: cpuPerStep("jetstream"),
        baseline: cpuPerStep("memory"),
        unit: "µs",
        digits: 1,
      },
      {
        metric: "Durable, SQLite history + journal (`--db`): µs per step vs the in-memory loop",
        agentloop: perStep("sqlite"),
        baseline: perStep("memory"),
        unit: "µs",
        digits: 1,
      },
      {
        metric:
          "Durable, `--history nats` on a local nats-server R1 (JetStream history, KV journal, dedupe, lease fence): µs per step vs the in-memory loop",
        agentloop: perStep("jetstream"),
        baseline: perStep("memory"),
        unit: "µs",
        digits: 1,
      },
      {
        metric: "Durable, `--history nats`: p50 per step vs the in-memory loop's p50 per step",
        agentloop: overall(samples.jetstream.steps, 50),
        baseline: overall(samples.memory.steps, 50),
        unit: "µs",
        digits: 0,
      },
      {
        metric: "Durable, `--history nats`: p99 per step vs the in-memory loop's p99 per step",
        agentloop: overall(samples.jetstream.steps, 99),
        baseline: overall(samples.memory.steps, 99),
        unit: "µs",
        digits: 0,
      },
      {
        metric: "Durable, SQLite: p50 / p99 per chat of 11 steps (agentloop column p50, baseline column p99)",
        agentloop: overall(samples.sqlite.chats, 50, 1),
        baseline: overall(samples.sqlite.chats, 99, 1),
        unit: "ms",
        digits: 2,
      },
      {
        metric:
          "Durable, `--history nats`: p50 / p99 per chat of 11 steps (agentloop column p50, baseline column p99)",
        agentloop: overall(samples.jetstream.chats, 50, 1),
        baseline: overall(samples.jetstream.chats, 99, 1),
        unit: "ms",
        digits: 2,
      },
      {
        metric: `End to end over NATS, a chat of ${E2E_TOOL_STEPS} tool steps, request → reply: \`--history nats\` vs the in-memory history, p50`,
        agentloop: overall(e2e.nats, 50, 1),
        baseline: overall(e2e.memory, 50, 1),
        unit: "ms",
        digits: 2,
      },
      {
        metric: `End to end over NATS, a chat of ${E2E_TOOL_STEPS} tool steps: \`--history nats\` vs the in-memory history, p99`,
        agentloop: overall(e2e.nats, 99, 1),
        baseline: overall(e2e.memory, 99, 1),
        unit: "ms",
        digits: 2,
      },
    ];
    rows.push({
      metric: `Journal CPU µs per tool step over a ${LONG_CHAT_STEPS}-step chat (SessionJournal on SQLite, compactions included) vs its first 10 steps`,
      agentloop: summarise(longChat.all),
      baseline: summarise(longChat.first),
      unit: "µs",
      digits: 1,
    });
    const sqliteRatio = perStep("sqlite").median / perStep("memory").median;
    const sqliteCpuRatio = cpuPerStep("sqlite").median / cpuPerStep("memory").median;
    const addedP50 = (p(samples.jetstream.steps, 50) - p(samples.memory.steps, 50)) * 1000;
    const addedP99 = (p(samples.jetstream.steps, 99) - p(samples.memory.steps, 99)) * 1000;
    const addedMean = perStep("jetstream").median - perStep("memory").median;
    const e2eP50 = p(e2e.nats, 50);
    database.close();
    return {
      title: "Durable path",
      rows,
      targets: [
        {
          target: "durable, SQLite history + journal ≤ 1.3× the in-memory loop per step",
          stands: `${sqliteRatio.toFixed(2)}× wall (${perStep("sqlite").median.toFixed(0)} µs vs ${perStep("memory").median.toFixed(0)} µs per step), ${sqliteCpuRatio.toFixed(2)}× CPU (${cpuPerStep("sqlite").median.toFixed(0)} µs vs ${cpuPerStep("memory").median.toFixed(0)} µs)`,
          met: sqliteRatio <= 1.3,
        },
        {
          target: "durable, JetStream R1: added cost ≤ 1 ms per step p50 and ≤ 5 ms p99",
          stands: `+${addedP50.toFixed(0)} µs p50, +${addedP99.toFixed(0)} µs p99 per step (mean +${addedMean.toFixed(0)} µs)`,
          met: addedP50 <= 1000 && addedP99 <= 5000,
        },
        {
          target: `end-to-end chat over NATS with ${E2E_TOOL_STEPS} tool steps ≤ 15 ms p50`,
          stands: `${e2eP50.toFixed(2)} ms p50, ${p(e2e.nats, 99).toFixed(2)} ms p99 (in-memory history: ${p(e2e.memory, 50).toFixed(2)} ms p50)`,
          met: e2eP50 <= 15,
        },
      ],
      notes: [
        `Durable path: the loop rows' scenario (zero-latency backend, ${TOOL_STEPS} tool steps of 20 deltas, then the answer: ${STEPS_PER_CHAT} steps per chat), events off, each chat on a fresh session (created untimed), ${chats} chats per round, rounds interleaved. A step runs from one model request's start to the next's (the first from the chat's start, the last to its end). SQLite: one WAL file, synchronous = NORMAL, history and journal on one handle. \`--history nats\`: NatsHistoryStore, KvChatJournal, RequestDedupe.answer around each chat (running mark, then the reply), the lease fence (a clock read) on every history write and model request; each chat carries a request id, so its answer is journaled until the reply is stored, then the journal is removed — all on the bench's nats-server (R1, file storage, local).`,
        `End to end: startHost (what \`serve\` runs) with the zero-latency backend (${E2E_TOOL_STEPS} tool steps), \`--history nats\` vs the default in-memory history, a client on its own NATS connection sending chat requests with an id, one at a time, each on a fresh session; ${e2e.nats.length} chats each.`,
      ],
    };
  } finally {
    await bus.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const LONG_CHAT_STEPS = 200;

/**
 * The journal alone over a long chat: CPU per tool step (the turn with its start mark, then the
 * result, each 300 characters), mean over all steps and over the first ten, one sample per chat.
 * An entry rewritten at every step costs in proportion to the chat so far; appended records do not.
 */
async function benchLongChatJournal(settings: BenchSettings): Promise<{ all: number[]; first: number[] }> {
  const database = openAgentDatabase(":memory:");
  const store = new SqliteChatJournal(database);
  const text = "word ".repeat(60);
  const result = { all: [] as number[], first: [] as number[] };
  const chats = settings.isQuick ? 2 : settings.runs;
  for (let chat = -settings.warmups; chat < chats; chat++) {
    const journal = await SessionJournal.open(store, "bench", `long${chat}`);
    journal.beginChat("c1", "hello", 0, "r1");
    journal.record({ role: "user", content: "hello" });
    await journal.flush();
    const perStep: number[] = [];
    for (let step = 1; step <= LONG_CHAT_STEPS; step++) {
      const before = process.cpuUsage();
      journal.record({
        role: "assistant",
        content: text,
        toolCalls: [{ id: `t${step}`, name: "lookup", arguments: BENCH_TOOL_ARGUMENTS }],
      });
      await journal.toolStarting(`t${step}`);
      journal.record({ role: "tool", toolCallId: `t${step}`, content: text });
      await journal.flush();
      const used = process.cpuUsage(before);
      perStep.push(used.user + used.system);
    }
    journal.endChat();
    await journal.flush();
    if (chat < 0) continue;
    const mean = (values: number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
    result.all.push(mean(perStep));
    result.first.push(mean(perStep.slice(0, 10)));
  }
  database.close();
  return result;
}

async function benchEndToEnd(
  settings: BenchSettings,
  prefix: string,
): Promise<{ nats: number[]; memory: number[] }> {
  const chats = settings.isQuick ? 20 : 200;
  const result = { nats: [] as number[], memory: [] as number[] };
  for (const history of ["nats", "memory"] as const) {
    const hostBus = await NatsBus.connect({
      url: settings.natsUrl,
      name: `agentloop-bench-e2e-host-${history}`,
    });
    const client = await NatsBus.connect({
      url: settings.natsUrl,
      name: `agentloop-bench-e2e-client-${history}`,
    });
    const hostPrefix = `${prefix}${history}`;
    const host = await startHost({
      bus: hostBus,
      prefix: hostPrefix,
      hostId: `bench-${history}`,
      ...(history === "nats" ? { history: "nats" as const } : {}),
      agents: [{ name: "bench", backend: stampingBackend([], E2E_TOOL_STEPS), tools: [benchToolSet] }],
    });
    try {
      const subject = chatSubject(hostPrefix, "bench");
      const ask = async (index: number) => {
        const reply = await client.request(
          subject,
          JSON.stringify({ session: `e${index}`, text: "hello", id: `r${index}` }),
          { timeoutMs: 30_000 },
        );
        const parsed = JSON.parse(reply.data) as { ok: boolean };
        if (!parsed.ok) throw new Error(`durable bench: an end-to-end chat failed: ${reply.data}`);
      };
      for (let index = 0; index < Math.ceil(chats / 4); index++) await ask(-1 - index);
      for (let index = 0; index < chats; index++) {
        const start = nowMs();
        await ask(index);
        result[history].push(nowMs() - start);
      }
    } finally {
      await host.close();
      await client.close();
      await hostBus.close();
    }
  }
  return result;
}
