import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { type FakeOpenAI, startFakeOpenAI, turn } from "../../src/testing/index.js";
import { record, uniqueRoot } from "../bus/bus-helpers.js";
import { type RunningServe, waitUntilServing } from "../host/running-serve.js";
import { linesOf, runCli, stackLines, startBinary } from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * `--config agentloop.config.js`: agents written in code, with tools from `defineTool`, served by
 * the built `agentloop serve` on a real nats-server (black-box), and a bad config file told as one
 * line naming the file and the field.
 */

const ROOT = fileURLToPath(new URL("../../", import.meta.url));

let server: NatsServer;
let bus: NatsBus;
let directory: string;

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "serve-config-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-config-"));
  // The project a user writes a config file in has agentloop installed: here, this repository.
  await mkdir(join(directory, "node_modules"));
  await symlink(ROOT, join(directory, "node_modules/agentloop"), "dir");
});

afterAll(async () => {
  await bus.close();
  await server.stop();
  await rm(directory, { recursive: true, force: true });
});

async function writeConfig(name: string, text: string): Promise<string> {
  const path = join(directory, name);
  await writeFile(path, text);
  return path;
}

/** The built binary as a {@link RunningServe}: stopped with SIGINT. */
function startServeBinary(args: readonly string[], env: Record<string, string>): RunningServe {
  const { child, result } = startBinary(["serve", ...args], { env, timeoutMs: 60_000 });
  return {
    run: result,
    stop: () => {
      child.kill("SIGINT");
      return result;
    },
  };
}

describe("agentloop serve --config", () => {
  let fake: FakeOpenAI;

  afterAll(async () => {
    await fake?.close();
  });

  it("serves an agent whose custom tool, defined in the config file, the model calls over NATS", async () => {
    fake = await startFakeOpenAI({
      chat: [
        turn({ toolCalls: [{ id: "call_1", name: "order_status", arguments: '{"orderId":"A-17"}' }] }),
        turn({ text: "Order A-17 has shipped." }),
      ],
    });
    const path = await writeConfig(
      "agentloop.config.js",
      `import { defineConfig, defineTool, z } from "agentloop";

const orderStatus = defineTool({
  name: "order_status",
  description: "Looks up an order's status.",
  parameters: z.object({ orderId: z.string().regex(/^[A-Z]-\\d+$/) }),
  execute: ({ orderId }) => ({ orderId, status: "shipped", computedBy: "config-tool" }),
});

export default defineConfig({
  agents: [
    {
      name: "support",
      systemPrompt: "You answer questions about orders.",
      provider: "openai-chat",
      model: "gpt-fake",
      baseUrl: ${JSON.stringify(fake.baseUrl)},
      tools: [orderStatus, "current_time"],
    },
  ],
});
`,
    );
    const prefix = uniqueRoot();
    const serve = startServeBinary(["--nats", server.url, "--prefix", prefix, "--config", path], {
      OPENAI_API_KEY: "test",
    });
    await waitUntilServing(bus, prefix, serve, "support", 30_000);
    const completed = record(bus, `${prefix}.events.support.s1.ToolCallCompleted`);
    await bus.flush();
    const message = await bus.request(
      chatSubject(prefix, "support"),
      JSON.stringify({ session: "s1", text: "Where is order A-17?" }),
      { timeoutMs: 20_000 },
    );
    expect(JSON.parse(message.data)).toMatchObject({
      ok: true,
      session: "s1",
      result: "Order A-17 has shipped.",
    });
    const [event] = await completed.waitFor(1);
    completed.unsubscribe();
    const toolEvent = JSON.parse(event!.data) as Extract<AgentEvent, { kind: "ToolCallCompleted" }>;
    expect(toolEvent).toMatchObject({ toolName: "order_status", toolCallId: "call_1" });
    expect(JSON.parse(toolEvent.result)).toEqual({
      orderId: "A-17",
      status: "shipped",
      computedBy: "config-tool",
    });

    const [first, second] = fake.requestsTo("chat").map((request) => request.body as Record<string, unknown>);
    const firstMessages = first?.messages as Array<{ role: string; content: unknown }>;
    expect(firstMessages[0]).toMatchObject({ role: "system" });
    expect(String(firstMessages[0]?.content)).toContain("You answer questions about orders.");
    const tools = (first?.tools as Array<{ function: { name: string; parameters: unknown } }>).map(
      (tool) => tool.function,
    );
    expect(tools.map((tool) => tool.name).sort()).toEqual(["current_time", "order_status"]);
    expect(tools.find((tool) => tool.name === "order_status")?.parameters).toMatchObject({
      type: "object",
      properties: { orderId: { type: "string" } },
      required: ["orderId"],
    });
    expect(JSON.stringify(second?.messages)).toContain("config-tool");

    const run = await serve.stop();
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("agents: support (openai-chat gpt-fake)");
  });
});

describe("a bad config file is one line naming the file and the field, exit 2", () => {
  const cases: Array<[string, string, RegExp]> = [
    [
      "a tool that is not a tool",
      `export default { agents: [{ name: "a", tools: [42] }] };`,
      /agents\[0\]\.tools\[0\]: must be a built-in tool set name, a ToolSet \(createToolSet\) or a tool \(defineTool\)$/,
    ],
    [
      "an unknown built-in in the second agent",
      `export default { agents: [{ name: "a" }, { name: "b", tools: ["current_time", "nope"] }] };`,
      /agents\[1\]\.tools\[1\]: unknown tool set "nope" \(known: /,
    ],
    [
      "a misspelt field",
      `export default { agents: [{ name: "a", systemPromt: "hi" }] };`,
      /agents\[0\]: unknown field "systemPromt"$/,
    ],
    [
      "a bad value",
      `export default { agents: [{ name: "a", maxIterations: 0 }] };`,
      /agents\[0\]\.maxIterations: /,
    ],
    [
      "duplicate names",
      `export default { agents: [{ name: "a" }, { name: "a" }] };`,
      /agents\[1\]\.name: duplicate agent "a"$/,
    ],
    ["no agents", `export default { agents: [] };`, /agents: must list at least one agent$/],
    [
      // The tools come from the built package while this CLI runs from source: they are told by shape.
      "two tools of one name",
      `import { defineTool, z } from "agentloop";
const tool = () => defineTool({ name: "twin", description: "d", parameters: z.object({}), execute: () => "" });
export default { agents: [{ name: "a", tools: [tool(), tool()] }] };`,
      /agents\[0\]\.tools: tool set "a_tools" defines tool "twin" twice$/,
    ],
    [
      "no default export",
      `export const agents = [];`,
      /has no default export \(export default defineConfig\(\{ agents: \[\.\.\.\] \}\)\)$/,
    ],
    ["a syntax error", `export default { agents: [ ;`, /cannot be loaded: /],
    [
      "code that throws",
      `throw new Error("no database configured");`,
      /cannot be loaded: no database configured$/,
    ],
    [
      "a missing import",
      `import { nothing } from "no-such-package-here"; export default nothing;`,
      /cannot be loaded: /,
    ],
  ];

  it.each(cases)("%s", async (name, text, reason) => {
    const path = await writeConfig(`${name.replaceAll(" ", "-")}.config.js`, text);
    const run = await runCli(["serve", "--config", path, "--nats", "nats://127.0.0.1:1"]);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe("");
    expect(linesOf(run.stderr)).toHaveLength(1);
    expect(stackLines(run.stderr)).toEqual([]);
    const start = `agentloop: config file ${path}: `;
    expect(run.stderr.slice(0, start.length)).toBe(start);
    expect(run.stderr.trimEnd()).toMatch(reason);
  });

  it("a file that does not exist", async () => {
    const path = join(directory, "missing.config.js");
    const run = await runCli(["up", "--config", path]);
    expect(run).toMatchObject({ code: 2, stdout: "" });
    expect(run.stderr).toBe(`agentloop: config file ${path}: cannot be read (no such file)\n`);
  });

  it("--config and --agents together", async () => {
    const run = await runCli(["serve", "--config", "a.js", "--agents", "b.json"]);
    expect(run).toEqual({
      code: 2,
      stdout: "",
      stderr: "agentloop: --config and --agents cannot be used together\n",
    });
  });
});
