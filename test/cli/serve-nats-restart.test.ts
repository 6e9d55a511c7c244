import { jetstreamManager } from "@nats-io/jetstream";
import { afterEach, describe, expect, it } from "vitest";
import { eventStreamName, lastStoredSeq, replayEvents } from "../../src/bus/event-log.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { sessionEventsPattern } from "../../src/bus/subjects.js";
import { describeError } from "../../src/errors/describe-error.js";
import type { AgentEvent } from "../../src/events/types.js";
import type { RecordedRequest } from "../../src/testing/index.js";
import { chatTurnSse, type FakeOpenAI, startFakeOpenAI } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { waitUntilServing } from "../host/running-serve.js";
import { type CliRun, runCli, startBinary, waitFor } from "../support/cli.js";
import { type RestartableNatsServer, startRestartableNatsServer } from "../support/nats-server.js";

/**
 * End to end: a nats-server dies (SIGKILL) while chats are running and comes
 * back 1 s or 8 s later. Before the fix every chat that finished during the outage lost its reply
 * (the client waited for its timeout) and its events, ChatCompleted included, live and in the
 * JetStream log, and the host logged nothing. Now every client gets its reply, each session's
 * log has no seq gap, and the host says what it held. The host is a spawned process (dist/); the
 * clients run `agentloop chat` in this process.
 */

const SESSIONS = ["s1", "s2", "s3"];
const LONG_MS = 10 * 60_000;

let cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  cleanups = [];
});

/** The user's text in a Chat Completions request. */
function userText(request: RecordedRequest): string {
  const messages = (request.body as { messages?: { role: string; content: unknown }[] }).messages ?? [];
  const content = messages.filter((message) => message.role === "user").at(-1)?.content;
  return typeof content === "string" ? content : JSON.stringify(content);
}

/** A model that answers `Answer to: <text>` but stalls after the first delta until `until` settles. */
function stallingModel(until: Promise<void>): Promise<FakeOpenAI> {
  return startFakeOpenAI({
    chat: (request) => ({
      ...(chatTurnSse({ text: ["Answer", " to: ", userText(request)] }) as Extract<
        ReturnType<typeof chatTurnSse>,
        { type: "sse" }
      >),
      // Frame 0 opens the assistant message, frame 1 is the first delta.
      pauseAfter: { frames: 2, until },
    }),
  });
}

/** A spawned host command, with what it wrote so far. */
interface SpawnedHost {
  /** Settles when the process ends. */
  run: Promise<CliRun>;
  stderr(): string;
  stop(): Promise<CliRun>;
}

function spawnHost(command: "serve" | "up", args: string[], env: Record<string, string>): SpawnedHost {
  const running = startBinary([command, ...args, ...(command === "up" ? ["--port", "0"] : [])], {
    env,
    timeoutMs: LONG_MS,
  });
  let stderr = "";
  running.child.stderr?.on("data", (text: string) => {
    stderr += text;
  });
  let stopping: Promise<CliRun> | undefined;
  return {
    run: running.result,
    stderr: () => stderr,
    stop: () => {
      stopping ??= (async () => {
        running.child.kill("SIGTERM");
        return running.result;
      })();
      return stopping;
    },
  };
}

/** The session's events in the JetStream log (retried while the test's own connection is coming back). */
async function loggedEvents(bus: NatsBus, prefix: string, session: string): Promise<AgentEvent[]> {
  const events: AgentEvent[] = [];
  for await (const stored of replayEvents(bus.connection, {
    prefix,
    filter: sessionEventsPattern(prefix, "assistant", session),
    since: { seq: 1 },
  })) {
    if (stored.isKnownKind) events.push(stored.event);
  }
  return events;
}

/** The event stream's counts and each session's last stored record, read directly (not replayed). */
async function streamState(bus: NatsBus, prefix: string): Promise<string> {
  try {
    const manager = await jetstreamManager(bus.connection, { checkAPI: false });
    const info = await manager.streams.info(eventStreamName(prefix));
    const lastOf = await Promise.all(
      SESSIONS.map(async (session) => {
        const filter = sessionEventsPattern(prefix, "assistant", session);
        return `${session} last seq ${await lastStoredSeq(bus.connection, { prefix, filter })}`;
      }),
    );
    return `${JSON.stringify(info.state)}; ${lastOf.join(", ")}`;
  } catch (error) {
    return `could not be read: ${describeError(error)}`;
  }
}

async function waitForLog(
  bus: NatsBus,
  prefix: string,
  isDone: (events: AgentEvent[]) => boolean,
): Promise<Map<string, AgentEvent[]>> {
  const logs = new Map<string, AgentEvent[]>();
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      for (const session of SESSIONS) logs.set(session, await loggedEvents(bus, prefix, session));
      if (SESSIONS.every((session) => isDone(logs.get(session) ?? []))) return logs;
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    if (Date.now() > deadline) throw new Error(`the event log never got there: ${JSON.stringify([...logs])}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.each([
  { command: "serve", downMs: 1_000 },
  { command: "serve", downMs: 8_000 },
  { command: "up", downMs: 1_000 },
] as const)("$command across a nats-server restart, $downMs ms down", ({ command, downMs }) => {
  it("answers every client and loses no event of the chats that finished during the outage", async () => {
    const server: RestartableNatsServer = await startRestartableNatsServer();
    cleanups.push(() => server.stop());
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    cleanups.push(async () => release());
    const model = await stallingModel(released);
    cleanups.push(() => model.close());
    const prefix = uniqueRoot();
    const host = spawnHost(
      command,
      ["--nats", server.url, "--prefix", prefix, "--provider", "openai-chat", "--base-url", model.baseUrl],
      { OPENAI_API_KEY: "test" },
    );
    cleanups.push(() => host.stop());
    const bus = await NatsBus.connect({ url: server.url, name: "restart-test" });
    cleanups.push(() => bus.close());
    await waitUntilServing(bus, prefix, host, "assistant", 60_000);

    // Three clients (`agentloop chat`, in this process: the host is the process under test), each
    // waiting for its chat's reply.
    const clients = SESSIONS.map((session) =>
      runCli([
        "chat",
        "--nats",
        server.url,
        "--prefix",
        prefix,
        "--session",
        session,
        "--events",
        "none",
        `question ${session}`,
      ]),
    );
    // Every chat is stalled after its first delta, and the log holds everything so far.
    await waitFor(() => model.requestsTo("chat").length === SESSIONS.length, 60_000);
    await waitForLog(bus, prefix, (events) => events.some((event) => event.kind === "ModelTextDelta"));

    await server.kill();
    // The host's own connection, the one its replies and events go out on: its lease connection
    // may notice first, and an event published before the host's connection noticed is written to
    // a socket already dead (core NATS: at most once).
    const noticed = new RegExp(`^agentloop ${command}: lost the NATS connection`, "m");
    await waitFor(() => noticed.test(host.stderr()), 60_000);
    // The chats finish while NATS is down: replies and events are published into the outage.
    release();
    await new Promise((resolve) => setTimeout(resolve, downMs));
    await server.restart();

    const runs = await Promise.all(clients);
    expect(runs).toEqual(
      SESSIONS.map((session) => ({ code: 0, stdout: `Answer to: question ${session}\n`, stderr: "" })),
    );
    const logs = await waitForLog(bus, prefix, (events) =>
      events.some((event) => event.kind === "ChatCompleted"),
    ).catch(async (error: unknown) => {
      // What the host said about the held events it sent on reconnect, and what the stream holds,
      // tell where they went: never stored, or stored and not replayed.
      throw new Error(
        `${describeError(error)}\nstream: ${await streamState(bus, prefix)}\nhost output:\n${host.stderr()}`,
      );
    });
    for (const session of SESSIONS) {
      const seqs = (logs.get(session) ?? []).map((event) => event.seq);
      expect(seqs, session).toEqual(Array.from({ length: seqs.length }, (_, index) => index + 1));
      expect(
        logs.get(session)?.find((event) => event.kind === "ChatCompleted"),
        session,
      ).toMatchObject({
        result: `Answer to: question ${session}`,
      });
    }
    const label = `agentloop ${command}`;
    expect(host.stderr()).toMatch(
      new RegExp(
        `^${label}: lost the NATS connection to 127\\.0\\.0\\.1:\\d+; holding replies and events`,
        "m",
      ),
    );
    const reconnected = new RegExp(
      `^${label}: reconnected to NATS at 127\\.0\\.0\\.1:\\d+; sent (\\d+) held messages$`,
      "m",
    ).exec(host.stderr());
    // At least each chat's reply and ChatCompleted went out of the hold.
    expect(Number(reconnected?.[1])).toBeGreaterThanOrEqual(2 * SESSIONS.length);
    expect(host.stderr()).not.toContain("dropped");
    const run = await host.stop();
    expect(run.code).toBe(0);
  }, 120_000);
});
