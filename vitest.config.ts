import { defineConfig } from "vitest/config";

/**
 * Test files run in parallel, each worker slot on its own nats-server (test/support/global-setup.ts).
 * Most files spend their time waiting on child processes, sockets and timers, not on the CPU, so
 * more workers than cores pays: on a quiet 2-core machine 3 and 4 workers took the same wall time
 * (351 s and 344 s of vitest), and 3 leaves more headroom on a loaded one.
 * Against an external server (`NATS_URL`), which every file would share, files run one at a time.
 */
const WORKERS = 3;
const sharesExternalServer = (process.env.NATS_URL ?? "") !== "";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Generous: a timeout only ends a hung test, and on a loaded machine (two CPU hogs besides the
    // suite) a test that spawns `dist/` processes took over 60 s.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Files in one worker share its module graph: the SDKs, XState and the NATS client load once per
    // worker instead of once per file (import time 182 s -> 17 s on 2 cores). Files therefore leave
    // nothing global behind (env stubs, tracer providers and fake timers are undone in their
    // afterEach), each starts its own servers and buses, and no better-sqlite3 handle is ever
    // dropped: on Node 24 the GC that finalises one aborts the worker (SIGABRT, "Worker exited
    // unexpectedly") in the middle of a later file. test/context/sqlite-handles-pinned.test.ts
    // checks the last.
    isolate: false,
    maxWorkers: sharesExternalServer ? 1 : WORKERS,
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/fail-on-console.ts"],
  },
});
