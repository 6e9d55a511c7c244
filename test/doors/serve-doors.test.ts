import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Role, type Task, TaskState } from "@a2a-js/sdk";
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from "@a2a-js/sdk/client";
import { type BaseEvent, EventType, HttpAgent } from "@ag-ui/client";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { type FakeProvider, startFakeProvider } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import {
  killServeProcesses,
  type ServeProcess,
  startServeProcess,
  waitUntilServing,
} from "../host/running-serve.js";
import { waitFor } from "../support/cli.js";
import { workerNatsServer } from "../support/nats-server.js";

/**
 * Every HTTP door of a real `agentloop serve --http` (the built binary, its own process) on the
 * worker's nats-server, driven with each protocol's own client library: AG-UI's HttpAgent, the A2A
 * SDK's client, the MCP SDK's Client over Streamable HTTP. The server asks for a token (as one
 * exposed beyond loopback does), so every client sends it. Then the UI's API of the same server:
 * the chats that came in through the doors are in its session list and its sessions' events.
 */

const TOKEN = "serve-doors-token-0123456789";
const AUTH = { authorization: `Bearer ${TOKEN}` };
let bus: NatsBus;
let directory: string;
let model: FakeProvider;
let serve: ServeProcess;
let origin: string;
const clients: Client[] = [];

/** The text of a chat-completions message (a string, or text parts). */
function contentText(message: { content?: unknown } | undefined): string {
  const content = message?.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part) => String((part as { text?: unknown }).text ?? "")).join("");
}

beforeAll(async () => {
  const nats = await workerNatsServer();
  const prefix = uniqueRoot();
  bus = await NatsBus.connect({ url: nats.url, name: "serve-doors-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-serve-doors-"));
  const agentsFile = join(directory, "agents.json");
  await writeFile(agentsFile, JSON.stringify({ agents: [{ name: "assistant", tools: ["current_time"] }] }));
  // Asked the time, the model calls current_time, then answers from its result; else it echoes.
  model = await startFakeProvider("openai-chat", {
    script: (request) => {
      const messages = (request.body as { messages?: Array<{ role?: string; content?: unknown }> }).messages;
      const last = messages?.at(-1);
      if (last?.role === "tool") return { text: "The clock answered." };
      const text = contentText(last);
      if (text.includes("time")) {
        return { toolCalls: [{ id: "call_clock", name: "current_time", arguments: {} }] };
      }
      return { text: `echo: ${text}` };
    },
  });
  serve = startServeProcess(
    [
      ...["--nats", nats.url, "--prefix", prefix, "--agents", agentsFile, "--history", "nats"],
      ...["--http", "0", "--ui-token", TOKEN],
    ],
    model.env,
  );
  let stdout = "";
  serve.child.stdout?.on("data", (text: string) => {
    stdout += text;
  });
  await waitUntilServing(bus, prefix, { run: serve.run });
  await waitFor(() => /agentloop serve: HTTP (http:\/\/\S+)/.test(stdout), 60_000);
  origin = new URL(/agentloop serve: HTTP (http:\/\/\S+)/.exec(stdout)![1]!).origin;
}, 120_000);

afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
  killServeProcesses();
  await model?.close();
  await bus?.close();
  await rm(directory, { recursive: true, force: true });
});

function authorizedFetch(): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("authorization", AUTH.authorization);
    return fetch(input, { ...init, headers });
  };
}

function a2aClients(): ClientFactory {
  const fetchImpl = authorizedFetch();
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  });
}

function userMessage(text: string, contextId: string) {
  return {
    tenant: "",
    message: {
      messageId: crypto.randomUUID(),
      contextId,
      taskId: "",
      role: Role.ROLE_USER,
      parts: [
        {
          content: { $case: "text" as const, value: text },
          metadata: undefined,
          filename: "",
          mediaType: "",
        },
      ],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  };
}

async function sessionEvents(
  session: string,
): Promise<Array<{ kind: string; text?: string; result?: string }>> {
  const response = await fetch(`${origin}/api/sessions/assistant/${session}/events`, { headers: AUTH });
  expect(response.status).toBe(200);
  return ((await response.json()) as { events: Array<{ kind: string; text?: string; result?: string }> })
    .events;
}

/** One SSE message: its `id:` (when it has one) and its `data:` as an AG-UI event. */
function sseMessages(text: string): Array<{ id?: string; event: BaseEvent }> {
  return text
    .split("\n\n")
    .map((block) => block.split("\n"))
    .filter((lines) => lines.some((line) => line.startsWith("data: ")))
    .map((lines) => {
      const id = lines.find((line) => line.startsWith("id: "))?.slice(4);
      const data = lines.find((line) => line.startsWith("data: "))!.slice(6);
      return { ...(id === undefined ? {} : { id }), event: JSON.parse(data) as BaseEvent };
    });
}

/** The README's `curl localhost:8080/...` lines of its Protocols block: each one's path and `-d` body. */
async function readmeCurlLines(): Promise<Array<{ path: string; body: string }>> {
  const readme = await readFile(join(import.meta.dirname, "../../README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Protocols"));
  const block = section.slice(
    section.indexOf("```sh") + 5,
    section.indexOf("```", section.indexOf("```sh") + 5),
  );
  const commands = block.replaceAll("\\\n", " ").split("\n");
  return commands
    .filter((command) => command.trimStart().startsWith("curl "))
    .map((command) => ({
      path: /localhost:8080(\/\S*)/.exec(command)?.[1] ?? "",
      body: /-d '([^']*)'/.exec(command)?.[1] ?? "",
    }));
}

describe("the HTTP doors of `agentloop serve --http`", () => {
  it("refuses a door request without the server's token", async () => {
    const response = await fetch(`${origin}/a2a/assistant/.well-known/agent-card.json`);
    expect(response.status).toBe(401);
  });

  it("AG-UI: HttpAgent runs a chat with a tool call and text; bad input is RUN_ERROR, an unknown agent 404", async () => {
    const agent = new HttpAgent({ url: `${origin}/agui/assistant`, threadId: "agui-thread", headers: AUTH });
    agent.addMessage({ id: "u1", role: "user", content: "what time is it?" });
    const events: BaseEvent[] = [];
    await agent.runAgent({}, { onEvent: ({ event }) => void events.push(event) });
    expect(events[0]?.type).toBe(EventType.RUN_STARTED);
    expect(events.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, outcome: { type: "success" } });
    expect(events.find((event) => event.type === EventType.TOOL_CALL_START)).toMatchObject({
      toolCallId: "call_clock",
      toolCallName: "current_time",
    });
    expect(events.some((event) => event.type === EventType.TOOL_CALL_RESULT)).toBe(true);
    expect(agent.messages.map((message) => message.role)).toEqual(["user", "assistant", "tool", "assistant"]);
    expect(agent.messages.at(-1)).toMatchObject({ role: "assistant", content: "The clock answered." });

    const malformed = await fetch(`${origin}/agui/assistant`, {
      method: "POST",
      headers: { ...AUTH, "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ threadId: "agui-thread", runId: "r", messages: "not a list" }),
    });
    expect(malformed.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await malformed.text();
    expect(text).not.toMatch(/\n\s+at /);
    const data = text
      .split("\n")
      .filter((line) => line.startsWith("data: "))
      .map((line) => JSON.parse(line.slice(6)) as BaseEvent);
    expect(data).toEqual([expect.objectContaining({ type: EventType.RUN_ERROR, code: "bad_request" })]);

    const nobody = new HttpAgent({ url: `${origin}/agui/nobody`, threadId: "t", headers: AUTH });
    nobody.addMessage({ id: "u1", role: "user", content: "hi" });
    // HttpAgent also logs the failure it rejects with: the one line expected here.
    const logged: string[] = [];
    vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => {
      logged.push(args.map(String).join(" "));
    });
    await expect(nobody.runAgent()).rejects.toMatchObject({ status: 404 });
    expect(logged).toEqual([expect.stringMatching(/HTTP 404: .*"code":"not_found"/)]);
  });

  it("A2A: the SDK's client sends a message and gets the task; malformed JSON-RPC and an unknown agent get their error codes", async () => {
    const a2a = await a2aClients().createFromUrl(`${origin}/a2a/assistant/.well-known/agent-card.json`, "");
    const sent = (await a2a.sendMessage(userMessage("hello over a2a", "a2a-context"))) as Task;
    expect(sent.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const task = await a2a.getTask({ tenant: "", id: sent.id });
    expect(task).toMatchObject({ id: sent.id, contextId: "a2a-context" });
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const answer = task.artifacts[0]?.parts[0]?.content;
    expect(answer?.$case === "text" ? answer.value : "").toBe("echo: hello over a2a");

    const rpc = (agent: string, body: string) =>
      fetch(`${origin}/a2a/${agent}/jsonrpc`, {
        method: "POST",
        headers: { ...AUTH, "content-type": "application/json" },
        body,
      });
    const malformed = await rpc("assistant", '{"jsonrpc": "2.0", "id": 1, "method":');
    expect(await malformed.json()).toEqual({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32700, message: expect.any(String) },
    });
    const unknown = await rpc(
      "nobody",
      JSON.stringify({ jsonrpc: "2.0", id: 9, method: "GetTask", params: { id: sent.id } }),
    );
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ jsonrpc: "2.0", id: 9, error: { code: -32601 } });
    await expect(
      a2aClients().createFromUrl(`${origin}/a2a/nobody/.well-known/agent-card.json`, ""),
    ).rejects.toThrow(/404/);
  });

  it("MCP: the SDK's Client lists the agent as a tool and calls it; a malformed body and an unknown tool are MCP errors", async () => {
    const client = new Client({ name: "serve-doors-test", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL("/mcp", origin), { requestInit: { headers: AUTH } }),
    );
    clients.push(client);
    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(["assistant"]);
    const result = await client.callTool({
      name: "assistant",
      arguments: { message: "hello over mcp", session: "mcp-session" },
    });
    expect(result.content).toEqual([{ type: "text", text: "echo: hello over mcp" }]);
    expect(result.structuredContent).toMatchObject({ agent: "assistant", session: "mcp-session" });

    const unknown = await client.callTool({ name: "nobody", arguments: { message: "hi" } }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(unknown).toBeInstanceOf(McpError);
    expect((unknown as McpError).code).toBe(ErrorCode.InvalidParams);
    expect((unknown as McpError).message).toMatch(/unknown tool "nobody"/);

    const malformed = await fetch(`${origin}/mcp`, {
      method: "POST",
      headers: { ...AUTH, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: "{not json",
    });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({
      jsonrpc: "2.0",
      id: null,
      error: { code: ErrorCode.ParseError },
    });
  });

  it("the README's AG-UI and A2A curl lines work as written, read from the README", async () => {
    const lines = await readmeCurlLines();
    expect(lines.map((line) => line.path)).toEqual(["/agui/assistant", "/a2a/assistant/jsonrpc"]);
    const [agui, a2a] = await Promise.all(
      lines.map((line) =>
        fetch(`${origin}${line.path}`, {
          method: "POST",
          headers: { ...AUTH, "content-type": "application/json" },
          body: line.body,
        }),
      ),
    );
    const events = sseMessages(await agui!.text()).map((message) => message.event);
    expect(events.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, result: "echo: hi" });
    expect(await a2a!.json()).toMatchObject({
      jsonrpc: "2.0",
      id: 1,
      result: { task: { status: { state: "TASK_STATE_COMPLETED" } } },
    });
  });

  it("AG-UI: a client that reconnects with its last event id gets the rest of the run from JetStream, once", async () => {
    const input = JSON.stringify({
      threadId: "agui-reconnect",
      runId: "run-1",
      messages: [{ id: "u1", role: "user", content: "tell me something" }],
    });
    const post = (headers: Record<string, string> = {}) =>
      fetch(`${origin}/agui/assistant`, {
        method: "POST",
        headers: { ...AUTH, "content-type": "application/json", ...headers },
        body: input,
      });
    const whole = sseMessages(await (await post()).text());
    expect(whole.at(-1)?.event).toMatchObject({
      type: EventType.RUN_FINISHED,
      result: "echo: tell me something",
    });
    const withIds = whole.filter((message) => message.id !== undefined);
    expect(withIds.length).toBeGreaterThan(3);
    // Cut off after the second event: the rest, read again by id, is exactly what followed it.
    const rest = sseMessages(await (await post({ "last-event-id": withIds[1]!.id! })).text()).filter(
      (message) => message.id !== undefined,
    );
    expect(rest.map((message) => message.id)).toEqual(withIds.slice(2).map((message) => message.id));
    expect(rest.map((message) => message.event)).toEqual(withIds.slice(2).map((message) => message.event));
  });

  it("the UI of the same server lists the chats that came in through each door, with their events", async () => {
    const response = await fetch(`${origin}/api/sessions`, { headers: AUTH });
    expect(response.status).toBe(200);
    const { sessions } = (await response.json()) as { sessions: Array<{ agent: string; session: string }> };
    const listed = sessions.filter((entry) => entry.agent === "assistant").map((entry) => entry.session);
    expect(listed).toEqual(expect.arrayContaining(["agui-thread", "a2a-context", "mcp-session"]));
    for (const [session, asked, answered] of [
      ["agui-thread", "what time is it?", "The clock answered."],
      ["a2a-context", "hello over a2a", "echo: hello over a2a"],
      ["mcp-session", "hello over mcp", "echo: hello over mcp"],
    ] as const) {
      const events = await sessionEvents(session);
      expect(events.find((event) => event.kind === "ChatStarted")).toMatchObject({ text: asked });
      expect(events.find((event) => event.kind === "ChatCompleted")).toMatchObject({ result: answered });
    }
    const tools = (await sessionEvents("agui-thread")).filter((event) => event.kind.startsWith("Tool"));
    expect(tools.length).toBeGreaterThan(0);
  });
});
