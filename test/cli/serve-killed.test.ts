import { readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { chatTurnSse, turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { killServeProcesses, startServeProcess, waitUntilServing } from "../host/running-serve.js";
import {
  type FakeProvider,
  linesOf,
  runBinary,
  startBinary,
  startFakeProvider,
  textTurn,
  waitFor,
} from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Black-box: `agentloop serve` (a real process) killed with SIGKILL mid-chat.
 * Before the fix the interrupted user message was not in the history, the remote `agentloop chat`
 * waited for its 30-minute limit, and the shell tool's child outlived the host.
 */

let server: NatsServer;
let bus: NatsBus;
let directory: string;
const providers: FakeProvider[] = [];

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "serve-killed-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-killed-"));
});

// A failed test must not leave a host running.
afterEach(() => killServeProcesses());

afterAll(async () => {
  await Promise.all(providers.splice(0).map((provider) => provider.close()));
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

async function provider(...args: Parameters<typeof startFakeProvider>): Promise<FakeProvider> {
  const started = await startFakeProvider(...args);
  providers.push(started);
  return started;
}

/** A chat completion stream that sends its first text delta and then nothing, holding on. */
const stalledTurn = { ...chatTurnSse({ text: ["Let me ", "think…"] }), stallAfter: 2 };

/** Alive, and not a zombie left for a parent that does not reap (a dead process here). */
/** The host pid of the `sleep <duration>` process, if one runs. */
function sleepPid(duration: string): number | undefined {
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const commandLine = readFileSync(`/proc/${entry}/cmdline`, "utf8");
      if (commandLine === `sleep\0${duration}\0`) return Number(entry);
    } catch {
      // Gone meanwhile.
    }
  }
  return undefined;
}

function isRunning(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state !== "Z" && state !== "X";
}

/** A user turn of an Anthropic request body as [role, texts]. */
function turnTexts(message: Record<string, unknown>): [unknown, unknown[]] {
  const content = message.content as Array<{ text?: string }>;
  return [message.role, content.map((block) => block.text)];
}

describe("a host killed with SIGKILL mid-chat", () => {
  it(
    "keeps the user message, and the waiting `agentloop chat` reports the vanished host and exits 1",
    { timeout: 120_000 },
    async () => {
      const prefix = uniqueRoot();
      const db = join(directory, "crash.db");
      const stalling = await provider("openai-chat", [stalledTurn]);
      const common = ["--nats", server.url, "--prefix", prefix, "--db", db];
      const serve = startServeProcess([...common, ...stalling.flags], stalling.env);
      await waitUntilServing(bus, prefix, serve);

      const chat = startBinary(
        ["chat", "--nats", server.url, "--prefix", prefix, "--session", "s1", "remember the number 42"],
        { timeoutMs: 120_000 },
      );
      // The model is streaming its answer: the chat is well under way.
      await waitFor(() => stalling.bodies().length === 1, 60_000);
      serve.child.kill("SIGKILL");

      const run = await chat.result;
      expect(run.code).toBe(1);
      expect(linesOf(run.stderr)).toEqual([
        expect.stringMatching(
          /^agentloop: the agent host serving "assistant" stopped responding \(no heartbeat for \d+ s\): it stopped, crashed or lost its NATS connection; the chat did not finish$/,
        ),
      ]);
      expect((await serve.run).code).toBe(128);

      // The host comes back on the same database (on Anthropic, which wants alternating turns): the
      // interrupted message is there — the journal resumes its chat first, then the next
      // message follows the resumed answer.
      const answering = await provider("anthropic", [textTurn("Noted: 42."), textTurn("It was 42.")]);
      const again = startServeProcess([...common, ...answering.flags], answering.env);
      await waitUntilServing(bus, prefix, again);
      const second = await runBinary(
        ["chat", "--nats", server.url, "--prefix", prefix, "--session", "s1", "what number?"],
        { timeoutMs: 60_000 },
      );
      expect(second).toMatchObject({ code: 0, stdout: "It was 42.\n" });
      const resumed = answering.bodies()[0]?.messages as Array<Record<string, unknown>>;
      expect(resumed.map(turnTexts)).toEqual([["user", ["remember the number 42"]]]);
      const messages = answering.bodies()[1]?.messages as Array<Record<string, unknown>>;
      expect(messages.map(turnTexts)).toEqual([
        ["user", ["remember the number 42"]],
        ["assistant", ["Noted: 42."]],
        ["user", ["what number?"]],
      ]);
      again.child.kill("SIGTERM");
      expect((await again.run).code).toBe(0);
    },
  );

  it("takes the shell tool's running command with it", { timeout: 60_000 }, async () => {
    const prefix = uniqueRoot();
    const agents = join(directory, "shell-agents.json");
    await writeFile(agents, JSON.stringify({ agents: [{ name: "assistant", tools: ["shell"] }] }));
    // The command may run in a PID namespace of its own (its $$ is not a host pid): it is found by
    // its unique command line instead.
    const duration = `30.${process.pid}${Date.now() % 1000}`;
    const command = `exec sleep ${duration}`;
    const model = await provider("openai-chat", [
      turn({ toolCalls: [{ id: "call_1", name: "shell", arguments: JSON.stringify({ command }) }] }),
    ]);
    const serve = startServeProcess(
      ["--nats", server.url, "--prefix", prefix, "--agents", agents, ...model.flags],
      model.env,
    );
    await waitUntilServing(bus, prefix, serve);
    // Nobody will answer this one: the host dies first.
    void bus
      .request(chatSubject(prefix, "assistant"), JSON.stringify({ session: "s1", text: "sleep a while" }), {
        timeoutMs: 60_000,
      })
      .catch(() => {});
    await waitFor(() => sleepPid(duration) !== undefined, 60_000);
    const pid = sleepPid(duration)!;
    try {
      expect(isRunning(pid)).toBe(true);
      serve.child.kill("SIGKILL");
      await serve.run;
      await waitFor(() => !isRunning(pid), 60_000);
    } finally {
      if (isRunning(pid)) process.kill(pid, "SIGKILL");
    }
  });
});
