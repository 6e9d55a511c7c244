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
    maxWorkers: sharesExternalServer ? 1 : WORKERS,
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/fail-on-console.ts"],
  },
});
