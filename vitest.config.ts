import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two test files at a time even on two cores (Vitest's default there is one): most of the
    // time goes to waiting on child processes (nats-server, serve, the fake providers), and one
    // run of the suite on a 2-core machine goes from about 9 to about 6 minutes.
    maxWorkers: 2,
    globalSetup: ["test/support/global-setup.ts"],
    setupFiles: ["test/support/fail-on-console.ts"],
  },
});
