import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalBus } from "../../src/bus/local-bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, sessionEventsPattern } from "../../src/bus/subjects.js";
import { parentLeaseFrom } from "../../src/config/runtime-config.js";
import { PARENT_LEASE_HEADER, readParentLease, renewParentLease } from "../../src/contract/parent-lease.js";
import type { AgentEvent } from "../../src/events/types.js";
import { ParentLeaseLapsedError, watchParentLease } from "../../src/host/parent-lease-watch.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import type { GenerateRequest, GenerateResponse } from "../../src/llm/types.js";
import { ScriptedBackend, turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { killServeProcesses, startServeProcess, waitUntilServing } from "../host/running-serve.js";
import { type FakeProvider, startFakeProvider, waitFor } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";
import { untilShardsBalanced } from "../support/preferred-session.js";

/**
 * A child's lease on its parent, black-box: `boss` runs in `agentloop serve` (the built binary,
 * `--parent-lease 2s`, no database: nobody can resume its chat), and asks `worker` on an in-process
 * host, whose model works until it is stopped. While `boss` waits, its renewals keep `worker`
 * going past its lease; once the serve process is killed (SIGKILL: no stop is sent), `worker`'s
 * chat stops by itself when the lease runs out, its model request aborted.
 */

/** A model that thinks until its request is aborted, recording each request's signal. */
class SlowBackend extends ScriptedBackend {
  readonly signals: AbortSignal[] = [];
  constructor() {
    super(() => ({ deltas: ["working"], delayMs: 120_000 }));
  }
  override generateStream(
    request: GenerateRequest,
    sink: Parameters<ScriptedBackend["generateStream"]>[1],
  ): Promise<GenerateResponse> {
    if (request.signal !== undefined) this.signals.push(request.signal);
    return super.generateStream(request, sink);
  }
}

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let provider: FakeProvider | undefined;
let worker: RunningHost | undefined;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "parent-lease-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-parent-lease-"));
});

afterAll(async () => {
  killServeProcesses();
  await worker?.close();
  await provider?.close();
  await bus?.close();
  await server?.stop();
  await rm(directory, { recursive: true, force: true });
});

describe("a child's lease on its parent", () => {
  it(
    "keeps the child running while the parent waits, and stops it once the parent's host is killed",
    { timeout: 180_000 },
    async () => {
      const prefix = uniqueRoot();
      const agentsFile = join(directory, "agents.json");
      await writeFile(agentsFile, JSON.stringify({ agents: [{ name: "boss", tools: ["ask_agent"] }] }));
      const model = new SlowBackend();
      const lines: string[] = [];
      worker = await startHost({
        bus,
        prefix,
        hostId: "h-worker",
        graceMs: 0,
        log: (line) => lines.push(line),
        agents: [{ name: "worker", backend: model }],
      });
      provider = await startFakeProvider("openai-chat", [
        turn({
          toolCalls: [
            {
              id: "call_1",
              name: "ask_agent",
              arguments: JSON.stringify({ agent: "worker", message: "dig" }),
            },
          ],
        }),
      ]);
      const serve = startServeProcess(
        [
          ...["--nats", server.url, "--prefix", prefix, "--agents", agentsFile],
          ...["--host-id", "h-boss", "--parent-lease", "2s"],
          ...provider.flags,
        ],
        provider.env,
      );
      await waitUntilServing(bus, prefix, serve);
      // Each host serves an agent the other does not: each holds every shard of its own.
      await untilShardsBalanced(bus, prefix, ["h-worker"]);
      await untilShardsBalanced(bus, prefix, ["h-boss"]);
      const events: AgentEvent[] = [];
      bus.subscribe(sessionEventsPattern(prefix, "worker", "boss-s1"), (message) => {
        events.push(JSON.parse(message.data) as AgentEvent);
      });
      const leases: string[] = [];
      bus.subscribe(`${prefix}.agents.worker.chat`, (message) => {
        const header = Object.entries(message.headers ?? {}).find(([name]) => name === PARENT_LEASE_HEADER);
        if (header !== undefined) leases.push(header[1]);
      });
      await bus.flush();

      // The requester goes away with the serve process: its reply never comes.
      bus
        .request(chatSubject(prefix, "boss"), JSON.stringify({ session: "s1", text: "go" }), {
          timeoutMs: 60_000,
        })
        .catch(() => {});
      await waitFor(() => model.signals.length === 1, 60_000);
      expect(leases.map((lease) => JSON.parse(lease))).toEqual([
        { subject: `${prefix}.sessions.boss.s1.waiting`, ttlMs: 2_000 },
      ]);
      // Two leases' worth of waiting: the parent's renewals keep the child going.
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      expect(model.signals[0]?.aborted).toBe(false);
      expect(events.some((event) => event.kind === "ChatFailed")).toBe(false);

      serve.child.kill("SIGKILL");
      await serve.run.catch(() => {});
      await waitFor(() => model.signals[0]?.aborted === true, 60_000);
      await waitFor(() => events.some((event) => event.kind === "ChatFailed"), 60_000);
      expect(events.find((event) => event.kind === "ChatFailed")).toMatchObject({
        error: { code: "cancelled" },
        parent: { agent: "boss", session: "s1", toolCallId: "call_1" },
      });
      expect(lines).toContainEqual(
        expect.stringMatching(
          /^stopping the chat of worker\/boss-s1: its asker boss\/s1 stopped renewing its lease \(nothing for 2 s\)/,
        ),
      );
    },
  );
});

describe("the parent lease header and its renewals", () => {
  it("reads a lease, none without the header, and refuses a malformed one", () => {
    const lease = { subject: "acme.sessions.boss.s1.waiting", ttlMs: 30_000 };
    expect(readParentLease({ "agentloop-parent-lease": JSON.stringify(lease) })).toEqual({ ok: true, lease });
    expect(readParentLease({ other: "x" })).toEqual({ ok: true, lease: undefined });
    expect(readParentLease(undefined)).toEqual({ ok: true, lease: undefined });
    for (const bad of [
      "{nope",
      JSON.stringify({ ...lease, ttlMs: 10 }),
      JSON.stringify({ ...lease, subject: "a.*" }),
    ]) {
      const read = readParentLease({ [PARENT_LEASE_HEADER]: bad });
      expect(read).toMatchObject({
        ok: false,
        message: expect.stringMatching(/^header Agentloop-Parent-Lease: /),
      });
    }
  });

  it("ends a lease a TTL after the parent call's last renewal; renewals of other calls do not count", async () => {
    const bus = new LocalBus();
    const lease = { subject: "acme.sessions.boss.s1.waiting", ttlMs: 1_000 };
    const parent = { agent: "boss", session: "s1", chatId: "c1", toolCallId: "call_1" };
    const watch = watchParentLease(bus, lease, parent);
    // Another call of the same session renewing keeps nothing alive; nothing heard yet starts nothing.
    const other = renewParentLease(bus, lease, { chatId: "c1", toolCallId: "call_2" });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(watch.signal.aborted).toBe(false);
    const renewing = renewParentLease(bus, lease, { chatId: "c1", toolCallId: "call_1" });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(watch.signal.aborted).toBe(false);
    renewing();
    await waitFor(() => watch.signal.aborted, 60_000);
    expect(String(watch.signal.reason)).toContain("its asker boss/s1 stopped renewing its lease");
    expect(watch.signal.reason).toBeInstanceOf(ParentLeaseLapsedError);
    expect(watch.signal.reason).toMatchObject({ code: "cancelled", retryable: false });
    other();
    watch.close();
    await bus.close();
  });

  it("reads --parent-lease and AGENTLOOP_PARENT_LEASE, refusing a value out of 1s to 1h in one line", () => {
    expect(parentLeaseFrom({}, {})).toBeUndefined();
    expect(parentLeaseFrom({ "parent-lease": "45s" }, {})).toBe(45_000);
    expect(parentLeaseFrom({}, { AGENTLOOP_PARENT_LEASE: "2m" })).toBe(120_000);
    expect(() => parentLeaseFrom({ "parent-lease": "10ms" }, {})).toThrow(
      "--parent-lease must be from 1s to 1h, got 10 ms",
    );
    expect(() => parentLeaseFrom({ "parent-lease": "soon" }, {})).toThrow(
      /^--parent-lease must be a duration/,
    );
  });
});
