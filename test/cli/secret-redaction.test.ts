import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { turn } from "../../src/testing/index.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { startServe, waitUntilServing } from "../host/running-serve.js";
import {
  type FakeProvider,
  HOSTED_PROVIDERS,
  linesOf,
  providerError,
  runCli,
  startFakeProvider,
  textTurn,
  toolResults,
} from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Secrets leaked through the shell tool and provider errors. The shell ran with
 * the host's whole environment (`echo $OPENAI_API_KEY` put the key into the events, the history
 * and the next request), and a provider error quoting the key was passed on verbatim. Now the
 * shell gets PATH, HOME, the locale and the agent's `shellEnv`, and every configured secret is
 * redacted from tool results, events, replies and error lines.
 */

const KEY = "sk-test-0123456789abcdef";

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let fake: FakeProvider | undefined;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "secret-redaction-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-secrets-"));
});

afterAll(async () => {
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

function shellCall(id: string, command: string) {
  return { id, name: "shell", arguments: JSON.stringify({ command }) };
}

describe("agentloop serve with the shell tool (real nats-server, fake OpenAI)", () => {
  it("gives commands a minimal environment plus shellEnv, and redacts the key from results, events, replies and logs", async () => {
    const keyFile = join(directory, "leaked.txt");
    await writeFile(keyFile, `the key is ${KEY}\n`);
    fake = await startFakeProvider("openai-chat", [
      turn({
        toolCalls: [
          shellCall("env", 'echo "key=[$OPENAI_API_KEY] allowed=[$ALLOWED_VAR] other=[$OTHER_VAR]"'),
          shellCall("file", `cat ${keyFile}`),
        ],
      }),
      textTurn("done"),
      providerError("openai-chat", 401, `Incorrect API key provided: ${KEY}.`),
    ]);
    const agents = join(directory, "agents.json");
    await writeFile(
      agents,
      JSON.stringify({ agents: [{ name: "ops", tools: ["shell"], shellEnv: ["ALLOWED_VAR"] }] }),
    );
    const prefix = uniqueRoot();
    const serve = startServe(["--nats", server.url, "--prefix", prefix, "--agents", agents, ...fake.flags], {
      OPENAI_API_KEY: KEY,
      ALLOWED_VAR: "visible",
      OTHER_VAR: "hidden-value",
    });
    await waitUntilServing(bus, prefix, serve, "ops");
    const events = record(bus, `${prefix}.events.ops.s1.>`);
    await bus.flush();
    const ask = async (text: string) =>
      JSON.parse(
        (
          await bus.request(chatSubject(prefix, "ops"), JSON.stringify({ session: "s1", text }), {
            timeoutMs: 15_000,
          })
        ).data,
      ) as Record<string, unknown>;

    expect(await ask("check the environment")).toMatchObject({ ok: true, result: "done" });
    const results = toolResults("openai-chat", fake.bodies()[1]!);
    expect(results).toEqual([
      { callId: "env", output: "exit code: 0\nkey=[] allowed=[visible] other=[]\n" },
      { callId: "file", output: "exit code: 0\nthe key is [redacted]\n" },
    ]);

    const failed = await ask("once more");
    expect(failed).toMatchObject({ ok: false, error: { code: "llm_error" } });
    expect(JSON.stringify(failed)).not.toContain(KEY);
    expect((failed as { error: { message: string } }).error.message).toContain("[redacted]");

    await vi.waitFor(
      () =>
        expect(events.messages.filter((message) => message.subject.endsWith(".ChatFailed"))).toHaveLength(1),
      { timeout: 10_000 },
    );
    const published = events.messages.map((message) => JSON.parse(message.data) as AgentEvent);
    const completed = published.filter((event) => event.kind === "ToolCallCompleted");
    // The two calls run concurrently: their completions come in either order, so match them by call id.
    const resultsById = Object.fromEntries(
      completed.map((event) => [
        (event as { toolCallId: string }).toolCallId,
        (event as { result: string }).result,
      ]),
    );
    expect(resultsById).toEqual(Object.fromEntries(results.map((result) => [result.callId, result.output])));
    expect(events.messages.some((message) => message.data.includes(KEY))).toBe(false);
    expect(published.find((event) => event.kind === "ChatFailed")).toMatchObject({
      error: { message: expect.stringContaining("[redacted]") },
    });
    events.unsubscribe();

    const run = await serve.stop();
    expect(run.code).toBe(0);
    expect(run.stdout + run.stderr).not.toContain(KEY);
  });
});

describe.each(HOSTED_PROVIDERS)("agentloop chat --local --provider %s", (provider) => {
  it("redacts the key a provider error quotes from the error line and the events", async () => {
    fake = await startFakeProvider(provider, [providerError(provider, 401, `invalid x-api-key: ${KEY}`)]);
    const variable = provider === "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
    const run = await runCli(["chat", "--local", ...fake.flags, "--events", "jsonl", "hello"], {
      env: { [variable]: KEY },
    });
    expect(run.code).toBe(1);
    expect(linesOf(run.stderr)).toEqual([expect.stringContaining("invalid x-api-key: [redacted]")]);
    expect(run.stdout).not.toContain(KEY);
    const events = linesOf(run.stdout).map((line) => JSON.parse(line) as AgentEvent);
    expect(events.find((event) => event.kind === "ChatFailed")).toMatchObject({
      error: { message: expect.stringContaining("[redacted]") },
    });
  });
});
