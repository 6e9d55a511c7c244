#!/usr/bin/env node
import { main } from "./main.js";

/** The `agentloop` executable: signals become an AbortSignal, the exit code comes from main. */
const controller = new AbortController();
let interrupts = 0;
const onSignal = () => {
  interrupts += 1;
  if (interrupts > 1) process.exit(130);
  controller.abort();
};
process.on("SIGINT", onSignal);
process.on("SIGTERM", onSignal);
main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  signal: controller.signal,
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
