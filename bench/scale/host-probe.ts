/**
 * Loaded into a bench's `serve` process with `node --import` (chat-cost.ts does so): it writes,
 * every {@link EVERY_MS}, one JSON line to `AGENTLOOP_PROBE_FILE` with the event loop's delay over
 * that stretch (max and p99, ms), the time spent in garbage collection (ms, and the longest pause),
 * the process's CPU (µs, cumulative) and its heap. With `AGENTLOOP_PROBE_PROFILE_DIR` set, SIGUSR2
 * starts a CPU profile and the next SIGUSR2 writes it there (`<n>.cpuprofile`), so a profile covers
 * one measured phase and not the opening of the sessions before it; with `AGENTLOOP_PROBE_HEAP=1`
 * also a sampling heap profile of the same phase (`<n>.heapprofile`: where the garbage comes from).
 */
import { appendFileSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { join } from "node:path";
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";

const EVERY_MS = 250;

const file = process.env.AGENTLOOP_PROBE_FILE;
const profileDir = process.env.AGENTLOOP_PROBE_PROFILE_DIR;
const isSamplingHeap = process.env.AGENTLOOP_PROBE_HEAP === "1";

/** One line of the probe file. */
export interface ProbeLine {
  /** Date.now() when written. */
  at: number;
  loopMaxMs: number;
  loopP99Ms: number;
  gcMs: number;
  gcMaxMs: number;
  cpuUserUs: number;
  cpuSystemUs: number;
  heapUsedBytes: number;
}

if (file !== undefined) {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let gcMs = 0;
  let gcMaxMs = 0;
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gcMs += entry.duration;
      gcMaxMs = Math.max(gcMaxMs, entry.duration);
    }
  }).observe({ entryTypes: ["gc"] });
  writeFileSync(file, "");
  const timer = setInterval(() => {
    const cpu = process.cpuUsage();
    const line: ProbeLine = {
      at: Date.now(),
      loopMaxMs: delay.max / 1e6,
      loopP99Ms: delay.percentile(99) / 1e6,
      gcMs,
      gcMaxMs,
      cpuUserUs: cpu.user,
      cpuSystemUs: cpu.system,
      heapUsedBytes: process.memoryUsage().heapUsed,
    };
    delay.reset();
    gcMs = 0;
    gcMaxMs = 0;
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  }, EVERY_MS);
  timer.unref();
}

if (profileDir !== undefined) {
  const session = new Session();
  session.connect();
  let profiles = 0;
  let isProfiling = false;
  process.on("SIGUSR2", () => {
    if (!isProfiling) {
      isProfiling = true;
      session.post("Profiler.enable", () => session.post("Profiler.start"));
      // Every sampled allocation, kept or not: garbage is what the collector spends its time on.
      if (isSamplingHeap)
        session.post("HeapProfiler.startSampling", {
          samplingInterval: 32_768,
          includeObjectsCollectedByMajorGC: true,
          includeObjectsCollectedByMinorGC: true,
        });
      return;
    }
    isProfiling = false;
    profiles += 1;
    const n = profiles;
    session.post("Profiler.stop", (error, result) => {
      if (error !== null) return;
      writeFileSync(join(profileDir, `${n}.cpuprofile`), JSON.stringify(result.profile));
    });
    if (isSamplingHeap)
      session.post("HeapProfiler.stopSampling", (error, result) => {
        if (error !== null) return;
        writeFileSync(join(profileDir, `${n}.heapprofile`), JSON.stringify(result.profile));
      });
  });
}
