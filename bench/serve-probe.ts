/**
 * A real `agentloop serve` (the CLI's own `main`, as `bin.ts` runs it) in a process the RSS bench
 * forks with `--expose-gc`, so the bench can ask, over the fork's IPC channel, for a full garbage
 * collection and the process's resident set size (VmRSS from /proc/self/status) at a quiet point.
 * Messages: `{ kind: "measure" }` → `{ kind: "measured", rssKb, rssBeforeGcKb, heapUsedKb,
 * heapTotalKb, externalKb, arrayBuffersKb, anonymousKb, spaces }` (`spaces`: each V8 heap space's
 * committed and used KB, to tell pages kept after a burst from live objects); `{ kind: "stop" }`
 * stops the host as a first SIGTERM would; `{ kind: "rss" }` → `{ kind: "rss", rssKb }` reads VmRSS
 * without collecting garbage; `{ kind: "snapshot" }` → `{ kind: "snapshot", file }`
 * writes a heap snapshot (to find where the memory lives). Arguments are serve's own.
 */
import { readFileSync } from "node:fs";
import { getHeapSpaceStatistics, writeHeapSnapshot } from "node:v8";
import { main } from "../src/cli/main.js";
import { processEnvironment } from "../src/config/process-environment.js";

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("serve-probe needs node --expose-gc");

function residentKb(): number {
  const line = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync("/proc/self/status", "utf8"));
  if (line === null) throw new Error("serve-probe: no VmRSS in /proc/self/status (Linux only)");
  return Number(line[1]);
}

/** Anonymous (malloc and V8) memory of the process, from /proc/self/smaps_rollup; 0 where absent. */
function anonymousKb(): number {
  try {
    const line = /^Anonymous:\s+(\d+)\s+kB$/m.exec(readFileSync("/proc/self/smaps_rollup", "utf8"));
    return line === null ? 0 : Number(line[1]);
  } catch {
    return 0;
  }
}

function spaces(): Record<string, { committedKb: number; usedKb: number }> {
  return Object.fromEntries(
    getHeapSpaceStatistics().map((space) => [
      space.space_name,
      {
        committedKb: Math.round(space.physical_space_size / 1024),
        usedKb: Math.round(space.space_used_size / 1024),
      },
    ]),
  );
}

const stop = new AbortController();
process.on("message", (message: { kind?: string }) => {
  if (message.kind === "stop") stop.abort();
  else if (message.kind === "snapshot") process.send?.({ kind: "snapshot", file: writeHeapSnapshot() });
  else if (message.kind === "rss") process.send?.({ kind: "rss", rssKb: residentKb() });
  else if (message.kind === "measure") {
    // Read before the collections below: what the process holds by itself, with only V8's own
    // collections (and its memory reducer) since the last burst.
    const rssBeforeGcKb = residentKb();
    gc();
    gc();
    const usage = process.memoryUsage();
    process.send?.({
      kind: "measured",
      rssKb: residentKb(),
      rssBeforeGcKb,
      heapUsedKb: usage.heapUsed / 1024,
      heapTotalKb: usage.heapTotal / 1024,
      externalKb: usage.external / 1024,
      arrayBuffersKb: usage.arrayBuffers / 1024,
      anonymousKb: anonymousKb(),
      spaces: spaces(),
    });
  }
});

main(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  stdin: process.stdin,
  env: processEnvironment(),
  signal: stop.signal,
}).then(
  (code) => {
    process.disconnect?.();
    process.exit(code);
  },
  (error: unknown) => {
    process.stderr.write(`serve-probe: ${String(error)}\n`);
    process.exit(1);
  },
);
