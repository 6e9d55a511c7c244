import { connect, type NatsConnection } from "@nats-io/transport-node";
import type { Bus } from "../../src/bus/bus.js";
import { createBusEventPublisher } from "../../src/bus/event-publisher.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import { interleave } from "../support/interleave.js";
import { RemoteSubscriber } from "../support/remote-subscriber.js";
import { type Row, ratioOf } from "../support/report.js";
import type { BenchSettings, SectionResult } from "../support/section.js";
import { type Measure, summarise } from "../support/stats.js";
import { BENCH_AGENT, BENCH_MODEL, BENCH_SYSTEM_PROMPT, createBenchAgent } from "../workload/bench-agent.js";
import { BENCH_TOOL_ARGUMENTS, benchTool } from "../workload/bench-tool.js";
import {
  agentloopDeltaSource,
  capturedDeltaPayloads,
  type LatencyProbe,
  publishThroughput,
  RemoteDeltaStamps,
} from "../workload/event-load.js";
import { runPlainChat } from "../workload/plain-loop.js";
import { ZeroLatencyBackend } from "../workload/zero-latency-backend.js";

/** Chats per latency run: each streams 11 × 20 deltas, one event-loop turn apart. */
const LATENCY_CHATS = 6;

/** Latency runs: p50 and p99 of one run each, summarised over the runs. */
export async function latencyRuns(
  variants: Record<string, () => Promise<unknown>>,
  probe: LatencyProbe,
  runs: number,
  chats: number,
): Promise<Record<string, { p50: Measure; p99: Measure }>> {
  const names = Object.keys(variants);
  const p50s = new Map<string, number[]>(names.map((name) => [name, []]));
  const p99s = new Map<string, number[]>(names.map((name) => [name, []]));
  const runOnce = async (name: string) => {
    for (let index = 0; index < chats; index++) {
      await variants[name]!();
      await probe.caughtUp();
    }
    return probe.takePercentiles();
  };
  for (const name of names) await runOnce(name);
  for (let round = 0; round < runs; round++) {
    for (let offset = 0; offset < names.length; offset++) {
      const name = names[(round + offset) % names.length]!;
      const { p50, p99 } = await runOnce(name);
      p50s.get(name)!.push(p50);
      p99s.get(name)!.push(p99);
    }
  }
  return Object.fromEntries(
    names.map((name) => [name, { p50: summarise(p50s.get(name)!), p99: summarise(p99s.get(name)!) }]),
  );
}

/**
 * §2 event publishing: events/s through agentloop's path onto a NatsBus vs raw nats.js publishes of
 * the same payloads, one subscriber consuming in another process; and text-delta → subscriber
 * latency in a streaming chat, agentloop vs a plain loop publishing with raw nats.js.
 */
export async function benchEventPublishing(settings: BenchSettings): Promise<SectionResult> {
  const total = settings.isQuick ? 5_000 : 20_000;
  const subscriber = await RemoteSubscriber.start(settings.natsUrl);
  const bus = await NatsBus.connect({ url: settings.natsUrl, name: "agentloop-bench-publisher" });
  const raw: NatsConnection = await connect({ servers: settings.natsUrl, name: "raw-publisher" });

  const publishAgentloop = agentloopDeltaSource(bus, "agentloop");
  const { subjects, payloads } = capturedDeltaPayloads(1_000);
  const publishRaw = (index: number) => {
    const slot = index % payloads.length;
    raw.publish(subjects[slot]!, payloads[slot]!);
  };
  let published = 0;
  const throughput = await interleave(
    {
      agentloop: async () => {
        published += total;
        return publishThroughput(publishAgentloop, () => bus.flush(), total);
      },
      raw: async () => {
        published += total;
        return publishThroughput(publishRaw, () => raw.flush(), total);
      },
    },
    { warmups: 1, runs: settings.runs },
  );
  // Every event must have reached the subscriber, or the publish rate means nothing.
  await subscriber.until("all", published);

  // Latency: the same paced stream (one event-loop turn before each delta, as off a socket).
  const stamps = new RemoteDeltaStamps(subscriber);
  const backend = new ZeroLatencyBackend({
    toolSteps: 10,
    toolName: benchTool.definition.name,
    toolArguments: BENCH_TOOL_ARGUMENTS,
    isPaced: true,
    onDelta: stamps.onSent,
  });
  const llm = new RetryingLlmClient({ backend });
  const agent = await createBenchAgent({ llm, session: "latency", onLog: createBusEventPublisher(bus) });
  const rawBus = { publish: (subject: string, data: string) => raw.publish(subject, data) } as unknown as Bus;
  const plainParams = {
    backend,
    tool: benchTool,
    systemPrompt: BENCH_SYSTEM_PROMPT,
    model: BENCH_MODEL,
    maxIterations: 20,
    agent: BENCH_AGENT,
    bus: rawBus,
  };
  await stamps.begin();
  const latencyChats = settings.isQuick ? 2 : LATENCY_CHATS;
  const latency = await latencyRuns(
    {
      agentloop: async () => {
        await agent.chat("hello");
        await agent.reset();
      },
      raw: () => runPlainChat(plainParams, "latency-raw", "hello"),
    },
    stamps,
    settings.runs,
    latencyChats,
  );

  await Promise.all([bus.close(), raw.drain()]);
  await subscriber.close();

  const rows: Row[] = [
    {
      metric:
        "Events/s published (one subscriber consuming): emitter → publisher → NatsBus vs raw nats.js publish of the same payloads",
      agentloop: throughput.agentloop,
      baseline: throughput.raw,
      unit: "ev/s",
      digits: 0,
    },
    {
      metric: "Delta → subscriber latency p50: agentloop chat on NatsBus vs plain loop on raw nats.js",
      agentloop: latency.agentloop!.p50,
      baseline: latency.raw!.p50,
      unit: "µs",
      digits: 0,
    },
    {
      metric: "Delta → subscriber latency p99: agentloop chat on NatsBus vs plain loop on raw nats.js",
      agentloop: latency.agentloop!.p99,
      baseline: latency.raw!.p99,
      unit: "µs",
      digits: 0,
    },
  ];
  const throughputRatio = ratioOf(rows[0]!);
  const p99Ratio = ratioOf(rows[2]!);
  return {
    title: "Event publishing",
    rows,
    targets: [
      {
        target: "events ≥ 70 % of raw publish throughput",
        stands: `${(throughputRatio * 100).toFixed(0)} % (${Math.round(throughput.agentloop.median).toLocaleString("en-US")} vs ${Math.round(throughput.raw.median).toLocaleString("en-US")} ev/s)`,
        met: throughputRatio >= 0.7,
      },
      {
        target: "delta latency p99 ≤ 2× raw",
        stands: `${p99Ratio.toFixed(2)}× (${latency.agentloop!.p99.median.toFixed(0)} vs ${latency.raw!.p99.median.toFixed(0)} µs)`,
        met: p99Ratio <= 2,
      },
    ],
    notes: [
      `Event publishing: ${total.toLocaleString("en-US")} ModelTextDelta events per run, published in chunks of 1,000 with an event-loop turn between chunks, timed until the connection's flush (the server has them all). One subscriber in its own process (bench/subscriber-worker.ts, like a logger or the UI) decodes every message; the bench checks it received all ${published.toLocaleString("en-US")}. The raw publisher sends the subjects and JSON payloads agentloop's path produced (captured once), so it does no stamping or stringifying.`,
      `Latency: ${latencyChats} chats per run, each 11 iterations × 20 deltas; the backend yields one event-loop turn before each delta (as deltas off a socket would) and stamps it; the subscriber process stamps each arrival (hrtime, CLOCK_MONOTONIC, comparable across processes). agentloop: createAgent → RetryingLlmClient → model-stream actor → emitter → publisher → NatsBus, all its events published; raw: a plain async loop publishing the deltas (and the few lifecycle events) with nats.js directly.`,
    ],
  };
}
