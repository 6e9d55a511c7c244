import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import { definitionSecrets } from "../../src/host/definition-secrets.js";
import { turn } from "../../src/testing/index.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { startServe, waitUntilServing } from "../host/running-serve.js";
import { type FakeProvider, startFakeProvider, textTurn, toolResults } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * Regression: the values an agent's settings hand out were never redacted: a `shellEnv` token
 * echoed by a command reached the model, the history and the events, and so did an MCP server's
 * `env` and `headers` values. They now join the host's secrets.
 */

const DEPLOY_TOKEN = "ghp_deploy0123456789abcdef";
const HEADER_TOKEN = "mcp-header-token-0123456789";
const MCP_ENV_VALUE = "mcp-env-secret-0123456789";

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let fake: FakeProvider;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "shell-env-secrets-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-shell-env-secrets-"));
});

afterAll(async () => {
  await bus.close();
  await fake?.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

describe("secrets from the agents' own settings", () => {
  it("collects shellEnv values, MCP env values and headers (and a header's credentials alone)", () => {
    expect(
      definitionSecrets(
        [
          { shellEnv: ["DEPLOY_TOKEN", "UNSET"] },
          {
            mcpServers: {
              fs: { command: "npx", env: { API_KEY: MCP_ENV_VALUE } },
              search: {
                url: "https://mcp.example.com/mcp",
                headers: { Authorization: `Bearer ${HEADER_TOKEN}` },
              },
            },
          },
        ],
        { DEPLOY_TOKEN },
      ).sort(),
    ).toEqual([DEPLOY_TOKEN, MCP_ENV_VALUE, `Bearer ${HEADER_TOKEN}`, HEADER_TOKEN].sort());
  });

  it("agentloop serve hides them in tool results, events and its log", { timeout: 60_000 }, async () => {
    const command = `echo "token=$DEPLOY_TOKEN header=${HEADER_TOKEN} env=${MCP_ENV_VALUE}"`;
    fake = await startFakeProvider("openai-chat", [
      turn({ toolCalls: [{ id: "call_1", name: "shell", arguments: JSON.stringify({ command }) }] }),
      textTurn("done"),
    ]);
    const agents = join(directory, "agents.json");
    await writeFile(
      agents,
      JSON.stringify({
        agents: [
          {
            name: "ops",
            tools: ["shell"],
            shellEnv: ["DEPLOY_TOKEN"],
            mcpServers: {
              // Nothing listens there: the host logs that the server is not running, and retries.
              search: { url: "http://127.0.0.1:9/mcp", headers: { Authorization: `Bearer ${HEADER_TOKEN}` } },
              tools: { command: "/nonexistent/mcp-server", env: { API_KEY: MCP_ENV_VALUE } },
            },
          },
        ],
      }),
    );
    const prefix = uniqueRoot();
    const serve = startServe(["--nats", server.url, "--prefix", prefix, "--agents", agents, ...fake.flags], {
      ...fake.env,
      DEPLOY_TOKEN,
    });
    await waitUntilServing(bus, prefix, serve, "ops");
    const events = record(bus, `${prefix}.events.ops.s1.>`);
    await bus.flush();
    const reply = await bus.request(
      chatSubject(prefix, "ops"),
      JSON.stringify({ session: "s1", text: "show the token" }),
      { timeoutMs: 30_000 },
    );
    expect(JSON.parse(reply.data)).toMatchObject({ ok: true, result: "done" });
    expect(toolResults("openai-chat", fake.bodies()[1]!)).toEqual([
      { callId: "call_1", output: "exit code: 0\ntoken=[redacted] header=[redacted] env=[redacted]\n" },
    ]);
    await vi.waitFor(
      () => expect(events.messages.some((message) => message.subject.endsWith(".ChatCompleted"))).toBe(true),
      { timeout: 10_000 },
    );
    const published = events.messages.map((message) => message.data).join("\n");
    expect(published).toContain("token=[redacted]");
    for (const secret of [DEPLOY_TOKEN, HEADER_TOKEN, MCP_ENV_VALUE]) expect(published).not.toContain(secret);
    events.unsubscribe();
    const run = await serve.stop();
    expect(run.code).toBe(0);
    for (const secret of [DEPLOY_TOKEN, HEADER_TOKEN, MCP_ENV_VALUE]) {
      expect(run.stdout + run.stderr).not.toContain(secret);
    }
  });
});
