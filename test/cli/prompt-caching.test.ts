import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { startServe, waitUntilServing } from "../host/running-serve.js";
import { type FakeProvider, runCli, startFakeProvider, textTurn } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Regression: Anthropic prompt caching could never be switched on. It is now
 * on by default for Anthropic (a cache breakpoint on the last message of each request), and an
 * agents file's `promptCaching: false` turns it off for one agent.
 */

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let fake: FakeProvider | undefined;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "prompt-caching-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-caching-"));
});

afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

afterAll(async () => {
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

/** How many `cache_control` breakpoints a Messages API body carries, and where the last one is. */
function breakpoints(body: Record<string, unknown>): { count: number; onLastMessage: boolean } {
  const messages = body.messages as Array<{ content: unknown }>;
  const count = (JSON.stringify(body).match(/"cache_control"/g) ?? []).length;
  const last = messages.at(-1)?.content;
  const onLastMessage = Array.isArray(last) && JSON.stringify(last.at(-1)).includes('"cache_control"');
  return { count, onLastMessage };
}

describe("Anthropic prompt caching", () => {
  it("is on by default: chat --local puts one breakpoint on the last message", async () => {
    fake = await startFakeProvider("anthropic", [textTurn("Hi there.")]);
    const run = await runCli(["chat", "--local", ...fake.flags, "hello"], { env: fake.env });
    expect(run.stderr).toBe("");
    expect(run.code).toBe(0);
    const [body] = fake.bodies();
    expect(breakpoints(body ?? {})).toEqual({ count: 1, onLastMessage: true });
  });

  it("serve: on for an agent by default, off for one whose agents-file entry says promptCaching: false", async () => {
    fake = await startFakeProvider("anthropic", [textTurn("One."), textTurn("Two.")]);
    const path = join(directory, "agents.json");
    await writeFile(
      path,
      JSON.stringify({ agents: [{ name: "cached" }, { name: "plain", promptCaching: false }] }),
    );
    const prefix = uniqueRoot();
    const serve = startServe(
      ["--nats", server.url, "--prefix", prefix, "--agents", path, ...fake.flags],
      fake.env,
    );
    try {
      await waitUntilServing(bus, prefix, serve, "cached");
      for (const agent of ["cached", "plain"]) {
        const reply = await bus.request(
          chatSubject(prefix, agent),
          JSON.stringify({ session: "s", text: "hi" }),
          {
            timeoutMs: 15_000,
          },
        );
        expect(JSON.parse(reply.data)).toMatchObject({ ok: true });
      }
    } finally {
      expect((await serve.stop()).code).toBe(0);
    }
    const [cached, plain] = fake.bodies();
    expect(breakpoints(cached ?? {})).toEqual({ count: 1, onLastMessage: true });
    expect(breakpoints(plain ?? {}).count).toBe(0);
  });
});
