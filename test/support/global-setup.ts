import type { TestProject } from "vitest/node";
import { resolveChromium } from "../ui/support/launch-chromium.js";
import { startNatsServer } from "./nats-server.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** URL of the one nats-server shared by the whole run (JetStream on). */
    natsUrl: string;
  }
}

/**
 * Vitest global setup: starts ONE nats-server for the whole run (or uses `NATS_URL`) and hands
 * its URL to the tests, which read it with `inject("natsUrl")`. Tests sharing it keep to their
 * own subjects and streams.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // Find (and, for the npm-shipped Chromium, unpack) the browser once, before the test workers
  // start, so parallel UI suites never unpack it at the same time. A missing browser fails the UI
  // suites themselves with the reason, not the whole run here.
  await resolveChromium().catch(() => {});
  const server = await startNatsServer();
  project.provide("natsUrl", server.url);
  return () => server.stop();
}
