/**
 * Child process for the measurements that need a process of their own: heap per session (a clean
 * heap and `--expose-gc`) and peak RSS under 1,000 concurrent chats (`maxRSS` covers a process's
 * whole life). Started by `runWorker` with the task as JSON in argv; answers over IPC.
 */
import { InMemoryContextHistory } from "../src/context/in-memory-history.js";
import { SessionActor } from "../src/host/session-actor.js";
import { RetryingLlmClient } from "../src/llm/retrying-client.js";
import { nowMs, yieldToEventLoop } from "./support/clock.js";
import { forceGc } from "./support/force-gc.js";
import type { WorkerResult, WorkerTask } from "./support/run-worker.js";
import { BENCH_AGENT, BENCH_MODEL, BENCH_SYSTEM_PROMPT, createBenchAgent } from "./workload/bench-agent.js";
import { BENCH_TOOL_ARGUMENTS, benchTool } from "./workload/bench-tool.js";
import { createMinimalXStateSession } from "./workload/minimal-session.js";
import { createMinimalXStateLoop } from "./workload/minimal-xstate-loop.js";
import { type BaselineParams, runPlainChat } from "./workload/plain-loop.js";
import { createShapedXStateLoop } from "./workload/shaped-xstate-loop.js";
import { ZeroLatencyBackend, type ZeroLatencyBackendParams } from "./workload/zero-latency-backend.js";

type Chat = () => Promise<unknown>;

interface Session {
  chat: Chat;
  reset(): Promise<unknown>;
}

function heapUsed(): number {
  forceGc();
  return process.memoryUsage().heapUsed;
}

function workload(toolSteps: number, beforeStep?: ZeroLatencyBackendParams["beforeStep"]) {
  const backend = new ZeroLatencyBackend({
    toolSteps,
    toolName: benchTool.definition.name,
    toolArguments: BENCH_TOOL_ARGUMENTS,
    ...(beforeStep ? { beforeStep } : {}),
  });
  const llm = new RetryingLlmClient({ backend });
  const baseline: BaselineParams = {
    backend,
    tool: benchTool,
    systemPrompt: BENCH_SYSTEM_PROMPT,
    model: BENCH_MODEL,
    maxIterations: 20,
    agent: BENCH_AGENT,
  };
  return {
    llm,
    baseline,
    xstateLoop: createMinimalXStateLoop(baseline),
    shapedLoop: createShapedXStateLoop(baseline),
  };
}

/** One session of `kind`, held idle. */
async function createIdle(
  kind: Extract<WorkerTask, { task: "idle" }>["kind"],
  index: number,
): Promise<unknown> {
  const session = `s${index}`;
  if (kind === "agent" || kind === "host") {
    const agent = await createBenchAgent({ llm: shared.llm, session, history: new InMemoryContextHistory() });
    return kind === "agent" ? agent : new SessionActor({ agent });
  }
  return createMinimalXStateSession(session, kind === "xstate-session");
}

const shared = workload(10);

/**
 * Heap bytes per idle session: `count` sessions created and held in `steps` equal steps, a full GC
 * after each; each step's growth divided by its sessions is one sample.
 */
async function idle(task: Extract<WorkerTask, { task: "idle" }>): Promise<number[]> {
  // Warm-up: code compiled and module-level caches filled are not per-session costs.
  for (let index = 0; index < 200; index++) {
    const session = await createIdle(task.kind, index);
    if (session instanceof SessionActor) await session.shutdown();
  }
  const perStep = Math.floor(task.count / task.steps);
  const held: unknown[] = [];
  const samples: number[] = [];
  let before = heapUsed();
  for (let step = 0; step < task.steps; step++) {
    for (let index = 0; index < perStep; index++) held.push(await createIdle(task.kind, held.length));
    const after = heapUsed();
    samples.push((after - before) / perStep);
    before = after;
  }
  return samples;
}

/**
 * Heap bytes per chat in flight: `count` sessions each start a chat that the backend holds in the
 * model request of iteration 2 (after one tool step); measured against the same sessions idle.
 */
async function active(task: Extract<WorkerTask, { task: "active" }>): Promise<number[]> {
  let parked = 0;
  let release: () => void = () => {};
  let gate = Promise.resolve();
  const { llm, baseline, xstateLoop } = workload(2, (step) => {
    if (step !== 1) return;
    parked++;
    return gate;
  });
  const sessions = async (count: number): Promise<Chat[]> => {
    const chats: Chat[] = [];
    for (let index = 0; index < count; index++) {
      if (task.kind === "agentloop") {
        const agent = await createBenchAgent({ llm, session: `s${index}` });
        chats.push(() => agent.chat("hello"));
      } else if (task.kind === "xstate") {
        const session = `s${index}`;
        chats.push(() => xstateLoop.chat(session, "hello"));
      } else {
        const session = `s${index}`;
        chats.push(() => runPlainChat(baseline, session, "hello"));
      }
    }
    return chats;
  };
  const samples: number[] = [];
  for (let round = 0; round <= task.rounds; round++) {
    const chats = await sessions(task.count);
    gate = new Promise((resolve) => {
      release = resolve;
    });
    parked = 0;
    const before = heapUsed();
    const running = chats.map((chat) => chat());
    while (parked < chats.length) await yieldToEventLoop();
    const after = heapUsed();
    release();
    await Promise.all(running);
    // Round 0 warms up.
    if (round > 0) samples.push((after - before) / chats.length);
  }
  return samples;
}

/**
 * Chats per second with `sessions` chats running at once. The sessions of every kind are created
 * first (untimed) and reused, `reset()` (untimed) before each round; or, with `isFresh`, each
 * conversation creates its session inside the timing and drops it after its chat.
 */
async function concurrency(
  task: Extract<WorkerTask, { task: "concurrency" }>,
): Promise<Record<string, number[]>> {
  const { llm, baseline, xstateLoop, shapedLoop } = workload(task.toolSteps ?? 2);
  let nextFresh = 0;
  const converse = async (kind: string, session: string): Promise<Session> => {
    if (kind === "agentloop") {
      const agent = await createBenchAgent({ llm, session });
      return { chat: () => agent.chat("hello"), reset: () => agent.reset() };
    }
    if (kind === "xstate") return { chat: () => xstateLoop.chat(session, "hello"), reset: async () => {} };
    if (kind === "shaped") return { chat: () => shapedLoop.chat(session, "hello"), reset: async () => {} };
    return { chat: () => runPlainChat(baseline, session, "hello"), reset: async () => {} };
  };
  const sessionsOf = new Map<string, Session[]>();
  if (task.isFresh !== true) {
    for (const kind of task.kinds) {
      const sessions: Session[] = [];
      for (let index = 0; index < task.sessions; index++) sessions.push(await converse(kind, `s${index}`));
      sessionsOf.set(kind, sessions);
    }
  }
  const freshChat = async (kind: string): Promise<unknown> =>
    (await converse(kind, `f${nextFresh++}`)).chat();
  const round = async (kind: string): Promise<number> => {
    const sessions = sessionsOf.get(kind);
    if (sessions !== undefined) await Promise.all(sessions.map((session) => session.reset()));
    forceGc();
    const start = nowMs();
    if (sessions !== undefined) await Promise.all(sessions.map((session) => session.chat()));
    else await Promise.all(Array.from({ length: task.sessions }, () => freshChat(kind)));
    return task.sessions / ((nowMs() - start) / 1000);
  };
  for (const kind of task.kinds) await round(kind);
  const samples: Record<string, number[]> = Object.fromEntries(task.kinds.map((kind) => [kind, []]));
  for (let run = 0; run < task.runs; run++) {
    for (let offset = 0; offset < task.kinds.length; offset++) {
      const kind = task.kinds[(run + offset) % task.kinds.length]!;
      samples[kind]!.push(await round(kind));
    }
  }
  return samples;
}

async function main(): Promise<void> {
  const task = JSON.parse(process.argv[2] ?? "{}") as WorkerTask;
  let samples: Record<string, number[]>;
  if (task.task === "idle") samples = { [task.kind]: await idle(task) };
  else if (task.task === "active") samples = { [task.kind]: await active(task) };
  else samples = await concurrency(task);
  const result: WorkerResult = { samples, peakRssMb: process.resourceUsage().maxRSS / 1024 };
  process.send?.(result);
  process.disconnect?.();
}

await main();
