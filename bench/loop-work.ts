/**
 * The work one loop iteration does, in figures that do not depend on the machine's load:
 * `node dist/bench/loop-work.js [on] [--sites N]`.
 *
 * On a shared machine the CPU time of one iteration moves by ±5–10 % between two runs of the
 * same build, so a change worth 2–5 % cannot be seen in `npm run bench` or in an A/B of CPU time.
 * What is printed here repeats to about 0.1 %:
 *
 * - bytes allocated per iteration (V8's sampling heap profiler with the objects the garbage
 *   collector already took counted too), for agentloop, agentloop's chart shape on bare XState and the
 *   minimal XState loop, on the loop-overhead workload (10 tool steps, then text; 20 deltas per
 *   response; sessions of 3 chats). Garbage collection is 15–20 % of the loop's CPU profile and
 *   scales with it;
 * - XState's steps per iteration, by machine (microsteps, events, actions, actors), from an
 *   inspector on agentloop's machines in a separate pass;
 * - with `--sites N`, agentloop's N largest allocation sites.
 *
 * `on` runs agentloop and the baselines with events on, published to a bus that drops them
 * (events built and encoded, no socket).
 */
import { Session } from "node:inspector/promises";
import type { InspectionEvent } from "xstate";
import type { Bus } from "../src/bus/bus.js";
import { createBusEventPublisher } from "../src/bus/event-publisher.js";
import { RetryingLlmClient } from "../src/llm/retrying-client.js";
import { yieldToEventLoop } from "./support/clock.js";
import { BENCH_AGENT, BENCH_MODEL, BENCH_SYSTEM_PROMPT, createBenchAgent } from "./workload/bench-agent.js";
import { BENCH_TOOL_ARGUMENTS, benchTool } from "./workload/bench-tool.js";
import { createMinimalXStateLoop } from "./workload/minimal-xstate-loop.js";
import type { BaselineParams } from "./workload/plain-loop.js";
import { createShapedXStateLoop } from "./workload/shaped-xstate-loop.js";
import { ZeroLatencyBackend } from "./workload/zero-latency-backend.js";

const TOOL_STEPS = 10;
const ITERATIONS_PER_CHAT = TOOL_STEPS + 1;
const CHATS_PER_SESSION = 3;
const WARM_UP_CHATS = 90;
const MEASURED_CHATS = 120;

const args = process.argv.slice(2);
const withEvents = args.includes("on");
const sitesAt = args.indexOf("--sites");
const siteCount = sitesAt === -1 ? 0 : Number(args[sitesAt + 1] ?? 20);

const backend = new ZeroLatencyBackend({
  toolSteps: TOOL_STEPS,
  toolName: benchTool.definition.name,
  toolArguments: BENCH_TOOL_ARGUMENTS,
});
const llm = new RetryingLlmClient({ backend });
const droppingBus: Bus = {
  publish: () => {},
  publishBytes: () => {},
} as unknown as Bus;
const publish = createBusEventPublisher(droppingBus);
const baseline: BaselineParams = {
  backend,
  tool: benchTool,
  systemPrompt: BENCH_SYSTEM_PROMPT,
  model: BENCH_MODEL,
  maxIterations: 20,
  agent: BENCH_AGENT,
  ...(withEvents ? { bus: droppingBus } : {}),
};
const shaped = createShapedXStateLoop(baseline);
const minimal = createMinimalXStateLoop(baseline);

let nextSession = 0;

/** Runs `chats` chats of one loop (sessions of three chats, as the bench does). */
type Workload = (chats: number, inspect?: (inspection: InspectionEvent) => void) => Promise<void>;

const agentloop: Workload = async (chats, inspect) => {
  for (let done = 0; done < chats; done += CHATS_PER_SESSION) {
    const agent = await createBenchAgent({
      llm,
      session: `w${nextSession++}`,
      ...(withEvents ? { onLog: publish } : {}),
      ...(inspect ? { inspect } : {}),
    });
    for (let round = 0; round < CHATS_PER_SESSION; round++) {
      if (round > 0) await agent.reset();
      await agent.chat("hello");
      await yieldToEventLoop();
    }
  }
};

const baselineWorkload =
  (loop: { chat(session: string, text: string): Promise<unknown> }): Workload =>
  async (chats) => {
    for (let done = 0; done < chats; done++) {
      await loop.chat(`w${nextSession++}`, "hello");
      await yieldToEventLoop();
    }
  };

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

/** Bytes allocated per iteration (and by site) while `workload` runs, collected objects included. */
async function allocatedPerIteration(
  workload: Workload,
): Promise<{ bytes: number; sites: Map<string, number> }> {
  await workload(WARM_UP_CHATS);
  const session = new Session();
  session.connect();
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await workload(MEASURED_CHATS);
  const { profile } = (await session.post("HeapProfiler.stopSampling")) as { profile: { head: ProfileNode } };
  session.disconnect();
  const iterations = MEASURED_CHATS * ITERATIONS_PER_CHAT;
  const sites = new Map<string, number>();
  let total = 0;
  // A builtin (Set, Map, Array.prototype.map…) is charged to the script function that called it.
  const walk = (node: ProfileNode, caller: string) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const here = url
      ? `${functionName || "(anonymous)"} ${url.replace(/^.*\/(dist|node_modules)\//, "")}:${lineNumber + 1}`
      : `${functionName || "(native)"} < ${caller}`;
    total += node.selfSize;
    sites.set(here, (sites.get(here) ?? 0) + node.selfSize / iterations);
    for (const child of node.children) walk(child, url ? here : caller);
  };
  walk(profile.head, "(root)");
  return { bytes: total / iterations, sites };
}

/** XState's steps per iteration in agentloop, by kind and machine. */
async function stepsPerIteration(): Promise<Map<string, number>> {
  await agentloop(WARM_UP_CHATS / 10);
  const counts = new Map<string, number>();
  const count = (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1);
  const chats = 30;
  await agentloop(chats, (inspection) => {
    const logicId = (inspection.actorRef as { logic?: { id?: unknown } }).logic?.id;
    const machine = typeof logicId === "string" ? logicId : "(promise or callback actor)";
    if (inspection.type === "@xstate.microstep") count(`microsteps: ${machine}`);
    else if (inspection.type === "@xstate.event") count(`events received: ${machine}`);
    else if (inspection.type === "@xstate.action") count(`actions: ${machine}`);
    else if (inspection.type === "@xstate.actor") count(`actors created: ${machine}`);
  });
  for (const [key, value] of counts) counts.set(key, value / (chats * ITERATIONS_PER_CHAT));
  return counts;
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(2)} KB`;
const results = {
  agentloop: await allocatedPerIteration(agentloop),
  shaped: await allocatedPerIteration(baselineWorkload(shaped)),
  minimal: await allocatedPerIteration(baselineWorkload(minimal)),
};
console.log(`Allocated per iteration, events ${withEvents ? "on" : "off"}:`);
console.log(`  agentloop                       ${kb(results.agentloop.bytes)}`);
console.log(
  `  agentloop's chart shape on bare XState ${kb(results.shaped.bytes)}  (agentloop ${(results.agentloop.bytes / results.shaped.bytes).toFixed(2)}×)`,
);
console.log(
  `  minimal XState loop             ${kb(results.minimal.bytes)}  (agentloop ${(results.agentloop.bytes / results.minimal.bytes).toFixed(2)}×)`,
);
console.log("XState steps per iteration (agentloop):");
for (const [key, value] of [...(await stepsPerIteration())].sort(([a], [b]) => a.localeCompare(b))) {
  console.log(`  ${value.toFixed(2).padStart(6)}  ${key}`);
}
if (siteCount > 0) {
  console.log(`Largest allocation sites (agentloop, bytes per iteration):`);
  const sites = [...results.agentloop.sites].sort(([, a], [, b]) => b - a).slice(0, siteCount);
  for (const [site, bytes] of sites) console.log(`  ${bytes.toFixed(0).padStart(7)}  ${site}`);
}
process.exit(0);
