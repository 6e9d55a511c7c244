import { afterEach, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatTurnSse, type FakeProvider, startFakeProvider } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { killServeProcesses, startServeProcess, waitUntilServing } from "../host/running-serve.js";
import { type RestartableNatsServer, startRestartableNatsServer } from "../support/nats-server.js";

/**
 * Black-box: a `serve` whose nats-server went away before SIGTERM used to log lease timeouts and
 * exit only after a second signal. Every NATS step of its shutdown is bounded now (and not waited
 * for at all while the connection is down), so one SIGTERM ends it, with exit code 0.
 */

let cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  killServeProcesses();
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  cleanups = [];
});

describe("serve with its nats-server gone", () => {
  it("ends on one SIGTERM with exit code 0", { timeout: 120_000 }, async () => {
    const server: RestartableNatsServer = await startRestartableNatsServer();
    cleanups.push(() => server.stop());
    const model: FakeProvider = await startFakeProvider("openai-chat", {
      script: () => chatTurnSse({ text: ["ok"] }),
    });
    cleanups.push(() => model.close());
    const bus = await NatsBus.connect({ url: server.url, name: "serve-shutdown-test" });
    cleanups.push(() => bus.close());
    const prefix = uniqueRoot();
    const serve = startServeProcess(
      ["--nats", server.url, "--prefix", prefix, "--history", "nats", "--host-id", "h1"],
      model.env,
    );
    await waitUntilServing(bus, prefix, serve);

    await server.kill();
    serve.child.kill("SIGTERM");
    // Far more than the bounded steps need, far less than a second signal's wait used to be.
    const outcome = await Promise.race([
      serve.run.then((run) => ({ exited: true, code: run.code })),
      new Promise<{ exited: false }>((resolve) => setTimeout(() => resolve({ exited: false }), 30_000)),
    ]);

    expect(outcome, serve.stderr()).toEqual({ exited: true, code: 0 });
    expect(serve.stderr()).toMatch(/stopping: finishing running chats/);
  });
});
