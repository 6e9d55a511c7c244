/**
 * agentloop's chat loop alone, for `node --cpu-prof dist/bench/profile-loop.js [on]`: the
 * loop-overhead workload (10 tool steps, then text; 20 deltas per response) on fresh sessions of
 * three chats each, as the bench runs it, but long enough that a profile shows the steady state.
 * `on` adds a no-op event listener (events built, nothing published).
 */
import { RetryingLlmClient } from "../src/llm/retrying-client.js";
import { createBenchAgent } from "./workload/bench-agent.js";
import { BENCH_TOOL_ARGUMENTS } from "./workload/bench-tool.js";
import { ZeroLatencyBackend } from "./workload/zero-latency-backend.js";

const ITERATIONS_PER_CHAT = 11;
const SESSIONS = 200;
const WARM_UP_SESSIONS = 20;

const llm = new RetryingLlmClient({
  backend: new ZeroLatencyBackend({ toolSteps: 10, toolName: "lookup", toolArguments: BENCH_TOOL_ARGUMENTS }),
});
const withEvents = process.argv[2] === "on";
let elapsedMs = 0;
let chats = 0;
for (let index = 0; index < SESSIONS; index++) {
  const agent = await createBenchAgent({
    llm,
    session: `p${index}`,
    ...(withEvents ? { onLog: () => {} } : {}),
  });
  for (let round = 0; round < 3; round++) {
    if (round > 0) await agent.reset();
    const started = performance.now();
    await agent.chat("go");
    await new Promise((resolve) => setImmediate(resolve));
    if (index >= WARM_UP_SESSIONS) {
      elapsedMs += performance.now() - started;
      chats += 1;
    }
  }
}
console.log(
  `${((elapsedMs * 1000) / (chats * ITERATIONS_PER_CHAT)).toFixed(1)} µs per iteration (events ${withEvents ? "on" : "off"})`,
);
