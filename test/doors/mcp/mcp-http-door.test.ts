import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  type ElicitRequest,
  ElicitRequestSchema,
  type ElicitResult,
  ErrorCode,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../../src/bus/nats-bus.js";
import { createMcpDoor } from "../../../src/doors/mcp/mcp-door.js";
import { AgentProtocolHost } from "../../../src/protocol/agent-protocol-host.js";
import type { ScriptedRequest, ScriptedStep } from "../../../src/testing/index.js";
import { startUiServer, type UiServer } from "../../../src/ui/ui-server.js";
import {
  definition,
  echoStep,
  type HostFixture,
  lastUserText,
  SLOW,
  sleepText,
  startHostFixture,
} from "../../host/host-fixture.js";
import { waitFor } from "../../support/cli.js";
import { type NatsServer, workerNatsServer } from "../../support/nats-server.js";

/**
 * agentloop as an MCP server over Streamable HTTP (`POST /mcp` on the UI's server), driven by the
 * MCP SDK's own Client against an in-process host on the worker's nats-server: the agents are
 * discovered from the hosts' `$SRV` services, each call is a chat over the bus contract.
 */

let server: NatsServer;
let bus: NatsBus;
let fixture: HostFixture;
let protocol: AgentProtocolHost;
let ui: UiServer;
let endpoint: URL;
const clients: Client[] = [];

/** `clock` calls `current_time` (which needs approval) when asked the time, then answers from its result. */
function clockStep(request: ScriptedRequest, index: number): ScriptedStep {
  const last = request.messages.at(-1);
  if (last?.role === "tool") {
    const content = typeof last.content === "string" ? last.content : JSON.stringify(last.content);
    return { text: content.includes("denied") ? "I may not look at the clock." : "It is noon." };
  }
  if (lastUserText(request).includes("time")) {
    return { toolCalls: [{ id: `call_${index}`, name: "current_time", arguments: {} }] };
  }
  return echoStep(request);
}

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "mcp-http-door" });
  fixture = await startHostFixture(bus, {
    definitions: [
      definition("bot"),
      definition("clock", { tools: ["current_time"], needsApproval: ["current_time"] }),
    ],
    scripts: { clock: clockStep },
  });
  protocol = await AgentProtocolHost.start({
    connection: bus.connection,
    host: fixture.host,
    owner: "mcptest",
  });
  ui = await startUiServer({
    bus,
    prefix: fixture.prefix,
    natsConnection: bus.connection,
    port: 0,
    doors: [createMcpDoor()],
  });
  endpoint = new URL("/mcp", ui.url);
});

afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
  await ui?.close();
  await protocol?.stop();
  await fixture?.close();
  await protocol?.drained();
  await bus?.close();
});

async function connect(
  elicit?: (request: ElicitRequest) => ElicitResult | Promise<ElicitResult>,
): Promise<Client> {
  const client = new Client(
    { name: "mcp-door-test", version: "1.0.0" },
    { capabilities: elicit === undefined ? {} : { elicitation: { form: {} } } },
  );
  if (elicit !== undefined) client.setRequestHandler(ElicitRequestSchema, (request) => elicit(request));
  await client.connect(new StreamableHTTPClientTransport(endpoint));
  clients.push(client);
  return client;
}

async function rpcErrorOf(call: Promise<unknown>): Promise<McpError> {
  const error = await call.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(McpError);
  return error as McpError;
}

describe("MCP server over Streamable HTTP", () => {
  it("lists one tool per agent, with the message/session input and the answer's output schema", async () => {
    const client = await connect();
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(["bot", "clock"]);
    const bot = tools.find((tool) => tool.name === "bot")!;
    expect(bot.inputSchema).toMatchObject({
      required: ["message"],
      properties: { message: { type: "string" } },
    });
    expect(bot.outputSchema).toMatchObject({ required: ["agent", "session", "result", "usage"] });
    expect(bot.execution).toEqual({ taskSupport: "optional" });
  });

  it("answers a call with the agent's text and {agent, session, result, usage}; the session continues", async () => {
    const client = await connect();
    const first = await client.callTool({ name: "bot", arguments: { message: "hello" } });
    expect(first.content).toEqual([{ type: "text", text: "echo: hello" }]);
    const structured = first.structuredContent as { session: string; usage: { total: number } };
    expect(structured).toMatchObject({ agent: "bot", result: "echo: hello" });
    expect(structured.session).toMatch(/^mcp-/);
    expect(structured.usage.total).toBeGreaterThan(0);

    const again = await client.callTool({
      name: "bot",
      arguments: { message: "again", session: structured.session },
    });
    expect(again.structuredContent).toMatchObject({ session: structured.session, result: "echo: again" });
    // The second request of that session carried the first exchange: one conversation.
    const texts = fixture.backends
      .get("bot")
      ?.requests.at(-1)
      ?.messages.map((message) => message.content);
    expect(texts).toContain("hello");
  });

  it("refuses an unknown agent and bad arguments with MCP errors (-32602)", async () => {
    const client = await connect();
    const unknown = await rpcErrorOf(client.callTool({ name: "nobody", arguments: { message: "hi" } }));
    expect(unknown.code).toBe(ErrorCode.InvalidParams);
    // The client puts the code in front once; the server's message is the reason alone.
    expect(unknown.message).toMatch(/^MCP error -32602: unknown tool "nobody": no agent of that name/);
    for (const [args, reason] of [
      [{}, 'missing field "message"'],
      [{ message: "" }, 'field "message": must not be empty'],
      [{ message: "hi", session: "no spaces allowed" }, 'field "session"'],
      [{ message: "hi", extra: 1 }, "extra"],
    ] as const) {
      const error = await rpcErrorOf(client.callTool({ name: "bot", arguments: args }));
      expect(error.code).toBe(ErrorCode.InvalidParams);
      expect(error.message).toContain(reason);
      expect(error.message).toMatch(/^MCP error -32602: invalid arguments for tool "bot": /);
    }
  });

  it("asks a held tool call as an elicitation and sends the user's decision as the approval", async () => {
    const questions: string[] = [];
    const client = await connect((request) => {
      questions.push(request.params.message);
      return { action: "accept", content: { decision: "approve" } };
    });
    const result = await client.callTool({ name: "clock", arguments: { message: "what time is it?" } });
    expect(result.content).toEqual([{ type: "text", text: "It is noon." }]);
    expect(questions).toEqual(['Agent "clock" wants to run current_time({}). Approve it?']);

    const denying = await connect(() => ({ action: "decline" }));
    const denied = await denying.callTool({ name: "clock", arguments: { message: "the time, please" } });
    expect(denied.content).toEqual([{ type: "text", text: "I may not look at the clock." }]);
  });

  it("runs a call as a task: input_required while the approval waits, then the result", async () => {
    let taskId: string | undefined;
    const statusWhileAsked: string[] = [];
    const client = await connect(async () => {
      // The question came through tasks/result: meanwhile the task says it needs the user.
      if (taskId !== undefined)
        statusWhileAsked.push((await client.experimental.tasks.getTask(taskId)).status);
      return { action: "accept", content: { decision: "approve" } };
    });
    await client.listTools();
    const stream = client.experimental.tasks.callToolStream(
      { name: "clock", arguments: { message: "what time is it?" } },
      CallToolResultSchema,
      { task: { ttl: 60_000 } },
    );
    let content: unknown;
    for await (const message of stream) {
      if (message.type === "taskCreated") taskId = message.task.taskId;
      if (message.type === "result") content = message.result.content;
      if (message.type === "error") throw message.error;
    }
    expect(content).toEqual([{ type: "text", text: "It is noon." }]);
    expect(statusWhileAsked).toEqual(["input_required"]);
    const task = await client.experimental.tasks.getTask(taskId!);
    expect(task.status).toBe("completed");
  });

  it("cancelling a task stops the chat on its host", async () => {
    const client = await connect();
    await client.listTools();
    const stream = client.experimental.tasks.callToolStream(
      { name: "bot", arguments: { message: SLOW, session: "mcp-slow" } },
      CallToolResultSchema,
      { task: { ttl: 60_000 } },
    );
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.value?.type).toBe("taskCreated");
    const taskId = first.value?.type === "taskCreated" ? first.value.task.taskId : "";
    await waitFor(() => fixture.host.sessions.find("bot", "mcp-slow")?.isIdle === false);
    const cancelled = await client.experimental.tasks.cancelTask(taskId);
    expect(cancelled.status).toBe("cancelled");
    await waitFor(() =>
      fixture.events.some((entry) => entry.event.kind === "ChatFailed" && entry.event.session === "mcp-slow"),
    );
    await iterator.return?.();
  });

  it("cancelling a task queued behind another chat of its session cancels only it: it never runs", async () => {
    const client = await connect();
    const first = client.callTool({
      name: "bot",
      arguments: { message: sleepText(1_500), session: "mcp-queue" },
    });
    await waitFor(() => fixture.host.sessions.find("bot", "mcp-queue")?.isIdle === false);
    const stream = client.experimental.tasks.callToolStream(
      { name: "bot", arguments: { message: "second", session: "mcp-queue" } },
      CallToolResultSchema,
      { task: { ttl: 60_000 } },
    );
    const iterator = stream[Symbol.asyncIterator]();
    const created = await iterator.next();
    const taskId = created.value?.type === "taskCreated" ? created.value.task.taskId : "";
    // Cancelled once it waits in the session's queue (a cancel that overtook the request on a
    // loaded machine would find nothing queued to take out, and the test would show nothing).
    await waitFor(() => (fixture.host.sessions.find("bot", "mcp-queue")?.queueLength ?? 0) >= 1);
    const cancelled = await client.experimental.tasks.cancelTask(taskId);
    expect(cancelled.status).toBe("cancelled");
    // The running chat goes on to its answer.
    expect((await first).content).toEqual([{ type: "text", text: "woke" }]);
    await iterator.return?.();
    // Reported as a chat that was cancelled before it started: no model request, no answer.
    const secondChat = () =>
      fixture.events.find(
        (entry) =>
          entry.event.session === "mcp-queue" &&
          entry.event.kind === "ChatStarted" &&
          entry.event.text === "second",
      )?.event.chatId;
    await waitFor(() => secondChat() !== undefined);
    expect(
      fixture.events.filter((entry) => entry.event.chatId === secondChat()).map((entry) => entry.event.kind),
    ).toEqual(["ChatStarted", "ChatFailed"]);
  });

  it("counts only the session's GET stream and calls waiting on a chat against the stream caps", async () => {
    const capped = await startUiServer({
      bus,
      prefix: fixture.prefix,
      natsConnection: bus.connection,
      maxStreams: 2,
      doors: [createMcpDoor()],
    });
    const client = new Client({ name: "mcp-capped", version: "1.0.0" });
    const other = new Client({ name: "mcp-capped-2", version: "1.0.0" });
    try {
      const transport = new StreamableHTTPClientTransport(new URL("/mcp", capped.url));
      await client.connect(transport);
      // The client's GET stream holds one of the two.
      await waitFor(() => capped.stats().openStreams === 1);
      const answer = await client.callTool({ name: "bot", arguments: { message: "capped" } });
      expect(answer.content).toEqual([{ type: "text", text: "echo: capped" }]);
      await other.connect(new StreamableHTTPClientTransport(new URL("/mcp", capped.url)));
      await waitFor(() => capped.stats().openStreams === 2);
      // Every stream taken: listing still answers, a further stream is MCP's error.
      for (let index = 0; index < 3; index++) {
        expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(["bot", "clock"]);
      }
      const refused = await fetch(new URL("/mcp", capped.url), {
        headers: { accept: "text/event-stream", "mcp-session-id": transport.sessionId ?? "" },
      });
      expect(refused.status).toBe(503);
      expect(await refused.json()).toMatchObject({
        jsonrpc: "2.0",
        error: { code: -32000, message: /overloaded/ },
      });
    } finally {
      await client.close().catch(() => {});
      await other.close().catch(() => {});
      await capped.close();
    }
  });

  it("ends a session on DELETE: its id is unknown afterwards", async () => {
    const client = await connect();
    const transport = client.transport as StreamableHTTPClientTransport;
    const id = transport.sessionId;
    expect(id).toBeDefined();
    await transport.terminateSession();
    const after = await fetch(endpoint, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": id!,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(after.status).toBe(404);
  });

  it("answers bad HTTP requests with JSON-RPC errors", async () => {
    const post = (body: string, headers: Record<string, string> = {}) =>
      fetch(endpoint, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          ...headers,
        },
        body,
      });
    const notJson = await post("{not json");
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32700 }, id: null });
    const noSession = await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }));
    expect(noSession.status).toBe(400);
    expect(await noSession.json()).toMatchObject({
      error: { code: -32000, message: expect.stringContaining("initialize") },
    });
    const expired = await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }), {
      "mcp-session-id": "no-such-session",
    });
    expect(expired.status).toBe(404);
    expect(await expired.json()).toMatchObject({ error: { code: -32001 } });
  });
});
