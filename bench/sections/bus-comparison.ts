import type { Bus } from "../../src/bus/bus.js";
import { createBusEventPublisher } from "../../src/bus/event-publisher.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { RetryingLlmClient } from "../../src/llm/retrying-client.js";
import { interleave } from "../support/interleave.js";
import type { Row } from "../support/report.js";
import type { BenchSettings, SectionResult } from "../support/section.js";
import { createBenchAgent } from "../workload/bench-agent.js";
import { BENCH_TOOL_ARGUMENTS, benchTool } from "../workload/bench-tool.js";
import {
  agentloopDeltaSource,
  DeltaStamps,
  publishThroughput,
  ReceiveCounter,
} from "../workload/event-load.js";
import { ZeroLatencyBackend } from "../workload/zero-latency-backend.js";
import { latencyRuns } from "./event-publishing.js";
import { microsPerIteration, type TimedSession } from "./loop-overhead.js";

let nextSession = 0;

/**
 * §6 LocalBus vs NatsBus under the same load: the event throughput to one subscriber, the chat
 * loop with events on and a subscriber consuming them, and delta → subscriber latency. The
 * subscriber goes through the Bus interface in both cases (on NATS: a second NatsBus connection).
 */
export async function benchBusComparison(settings: BenchSettings): Promise<SectionResult> {
  const total = settings.isQuick ? 5_000 : 20_000;
  const local = new LocalBus();
  const nats = await NatsBus.connect({ url: settings.natsUrl, name: "agentloop-bench-publisher" });
  const natsSubscriber = await NatsBus.connect({ url: settings.natsUrl, name: "agentloop-bench-subscriber" });
  const counters = { local: new ReceiveCounter(), nats: new ReceiveCounter() };
  const stamps = new DeltaStamps();
  let isTimingDeltas = false;
  const subscribe = (bus: Bus, counter: ReceiveCounter) =>
    bus.subscribe("agentloop.events.>", (message) => {
      counter.onMessage();
      if (isTimingDeltas && message.subject.endsWith(".ModelTextDelta")) stamps.onReceived();
    });
  subscribe(local, counters.local);
  subscribe(natsSubscriber, counters.nats);
  await natsSubscriber.flush();

  // Each counter hears only its own bus, so its running total is what the next run waits for.
  const untilConsumed = (counter: ReceiveCounter) => {
    let expected = 0;
    return () => {
      expected += total;
      return counter.until(expected);
    };
  };
  const consumed = { local: untilConsumed(counters.local), nats: untilConsumed(counters.nats) };
  const throughput = await interleave(
    {
      local: () => publishThroughput(agentloopDeltaSource(local, "local"), consumed.local, total),
      nats: () => publishThroughput(agentloopDeltaSource(nats, "nats"), consumed.nats, total),
    },
    { warmups: 1, runs: settings.runs },
  );

  const backend = new ZeroLatencyBackend({
    toolSteps: 10,
    toolName: benchTool.definition.name,
    toolArguments: BENCH_TOOL_ARGUMENTS,
  });
  const llm = new RetryingLlmClient({ backend });
  const sessions = async (bus: Bus): Promise<TimedSession[]> => {
    const onLog = createBusEventPublisher(bus);
    const created: TimedSession[] = [];
    for (let index = 0; index < 2; index++) {
      const agent = await createBenchAgent({ llm, session: `b${nextSession++}`, onLog });
      created.push({ chat: () => agent.chat("hello"), reset: () => agent.reset() });
    }
    return created;
  };
  const minMs = settings.isQuick ? 15 : 60;
  const loop = await interleave(
    {
      local: () => microsPerIteration(() => sessions(local), minMs),
      nats: () => microsPerIteration(() => sessions(nats), minMs),
    },
    { warmups: settings.warmups, runs: settings.runs },
  );

  const pacedBackend = new ZeroLatencyBackend({
    toolSteps: 10,
    toolName: benchTool.definition.name,
    toolArguments: BENCH_TOOL_ARGUMENTS,
    isPaced: true,
    onDelta: stamps.onSent,
  });
  const pacedLlm = new RetryingLlmClient({ backend: pacedBackend });
  const localAgent = await createBenchAgent({
    llm: pacedLlm,
    session: "latency-local",
    onLog: createBusEventPublisher(local),
  });
  const natsAgent = await createBenchAgent({
    llm: pacedLlm,
    session: "latency-nats",
    onLog: createBusEventPublisher(nats),
  });
  // What the loop runs published must be delivered before arrivals are paired with sends.
  await local.flush();
  await nats.flush();
  await natsSubscriber.flush();
  isTimingDeltas = true;
  const latency = await latencyRuns(
    {
      local: async () => {
        await localAgent.chat("hello");
        await localAgent.reset();
      },
      nats: async () => {
        await natsAgent.chat("hello");
        await natsAgent.reset();
      },
    },
    stamps,
    settings.runs,
    settings.isQuick ? 2 : 6,
  );
  await Promise.all([local.close(), nats.close(), natsSubscriber.close()]);

  const rows: Row[] = [
    {
      metric:
        "LocalBus (agentloop column) vs NatsBus (baseline column): events/s to one in-process subscriber",
      agentloop: throughput.local,
      baseline: throughput.nats,
      unit: "ev/s",
      digits: 0,
    },
    {
      metric: "LocalBus vs NatsBus: chat loop µs per iteration, events on, one subscriber",
      agentloop: loop.local,
      baseline: loop.nats,
      unit: "µs",
      digits: 1,
    },
    {
      metric: "LocalBus vs NatsBus: delta → subscriber latency p50",
      agentloop: latency.local!.p50,
      baseline: latency.nats!.p50,
      unit: "µs",
      digits: 0,
    },
    {
      metric: "LocalBus vs NatsBus: delta → subscriber latency p99",
      agentloop: latency.local!.p99,
      baseline: latency.nats!.p99,
      unit: "µs",
      digits: 0,
    },
  ];
  return {
    title: "LocalBus vs NatsBus",
    rows,
    targets: [],
    notes: [
      "LocalBus vs NatsBus: the same three loads as above, the subscriber going through the Bus interface on both (on NATS a second NatsBus connection in this process). No target: the figures say what `agentloop up` without a nats-server costs or saves.",
    ],
  };
}
