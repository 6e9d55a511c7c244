import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import type { CliContext, RuntimeConfig } from "../../src/cli/cli-context.js";
import { UsageError } from "../../src/cli/cli-context.js";
import { uiCommand } from "../../src/cli/commands/ui.js";
import { workerNatsServer } from "../support/nats-server.js";

/** Runs `agentloop ui` in-process; resolves once it printed its URL. */
function runUi(natsUrl: string, flags: CliContext["flags"] = {}) {
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  let out = "";
  let err = "";
  stdout.on("data", (chunk: Buffer) => {
    out += chunk.toString();
  });
  stderr.on("data", (chunk: Buffer) => {
    err += chunk.toString();
  });
  const abort = new AbortController();
  const config: RuntimeConfig = {
    provider: "demo",
    model: "demo",
    contextWindow: 128_000,
    natsUrl,
    prefix: "agentloop",
  };
  const done = uiCommand({ positionals: [], flags, config, env: {}, stdout, stderr, signal: abort.signal });
  let isDone = false;
  done.then(
    () => {
      isDone = true;
    },
    () => {
      isDone = true;
    },
  );
  const url = (async () => {
    while (!isDone) {
      const match = /(http:\/\/\S+\/)/.exec(out);
      if (match) return match[1]!;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    throw new Error(`agentloop ui ended without printing a URL: ${err}`);
  })();
  url.catch(() => undefined);
  return { done, url, abort, output: () => ({ out, err }) };
}

describe("agentloop ui", () => {
  it("falls back to the in-process bus when no NATS server answers, says so, serves, and stops on abort", async () => {
    const run = runUi("nats://127.0.0.1:1");
    const url = await run.url;
    const info = (await (await fetch(new URL("/api/info", url))).json()) as { bus: string };
    expect(info.bus).toBe("local");
    expect(run.output().out).toContain("(bus: local)");
    expect(run.output().err).toMatch(/no NATS server at nats:\/\/127\.0\.0\.1:1; using the in-process bus/);
    run.abort.abort();
    expect(await run.done).toBe(0);
  });

  it("uses NATS when reachable, with the JetStream log for history", async () => {
    const server = await workerNatsServer();
    try {
      const run = runUi(server.url);
      const url = await run.url;
      const info = (await (await fetch(new URL("/api/info", url))).json()) as {
        bus: string;
        history: string;
      };
      expect(info).toMatchObject({ bus: "nats", history: "jetstream" });
      expect(run.output().err).toBe("");
      run.abort.abort();
      expect(await run.done).toBe(0);
    } finally {
      await server.stop();
    }
  });

  it("rejects a bad --port", async () => {
    const run = runUi("nats://127.0.0.1:1", { port: "http" });
    await expect(run.done).rejects.toBeInstanceOf(UsageError);
  });
});
