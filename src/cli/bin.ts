#!/usr/bin/env node
import { processEnvironment } from "../config/process-environment.js";
import { main } from "./main.js";
import { nodeAdvice } from "./node-advice.js";

/**
 * The `agentloop` executable: signals become AbortSignals, the exit code comes from main. The first
 * SIGINT / SIGTERM asks to stop (a host drains), the second to stop now (a host cancels what runs,
 * still answering every caller and writing history), the third exits at once.
 */
const controller = new AbortController();
const urgent = new AbortController();
let interrupts = 0;
const onSignal = () => {
  interrupts += 1;
  if (interrupts === 1) controller.abort();
  else if (interrupts === 2) urgent.abort();
  else process.exit(130);
};
/**
 * A reader that went away (`agentloop tail | head -1`) is the end of the command, not a failure:
 * the output has nowhere to go, so it exits 0 without a word (as `cat` and `grep` do). Anything a
 * host holds survives that as it survives `kill -9` (histories, journals, parked approvals).
 */
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (error: NodeJS.ErrnoException) => {
    if (error.code === "EPIPE") process.exit(0);
    if (stream === process.stdout)
      process.stderr.write(`agentloop: cannot write the output: ${error.message}\n`);
    process.exit(1);
  });
}
process.on("SIGINT", onSignal);
const advice = nodeAdvice(process.version, process.env);
if (advice !== undefined) process.stderr.write(`${advice}\n`);
process.on("SIGTERM", onSignal);
main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: processEnvironment(),
  signal: controller.signal,
  urgentSignal: urgent.signal,
}).then(
  (code) => {
    process.exitCode = code;
    // Open handles (a NATS connection being drained, timers) must not keep a finished command alive.
    setTimeout(() => process.exit(code), 2_000).unref();
  },
  (error: unknown) => {
    process.stderr.write(`agentloop: internal error: ${String(error)}\n`);
    process.exit(1);
  },
);
