import { type Message, Role, type StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { createA2aDoor } from "../../src/doors/a2a/a2a-door.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import { ScriptedBackend } from "../../src/testing/index.js";
import { startUiServer, type UiServer } from "../../src/ui/ui-server.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import { workerNatsServer } from "../support/nats-server.js";

/**
 * The A2A door black-box, with the SDK's own client over both bindings: an agentloop host on the
 * worker's nats-server, the door on the UI's HTTP server, tasks read back from NATS.
 */

let bus: NatsBus;
let host: RunningHost;
let server: UiServer;
let base: string;
const prefix = uniqueRoot();

beforeAll(async () => {
  bus = await NatsBus.connect({ url: (await workerNatsServer()).url, name: "a2a door test" });
  const backend = new ScriptedBackend((request) => {
    const last = request.messages.at(-1);
    if (last?.role === "tool") return { text: `the clock said ${String(last.content).slice(0, 4)}` };
    const text = String(last?.content ?? "");
    if (text.includes("time")) return { toolCalls: [{ name: "current_time" }] };
    return { text: `echo: ${text.slice(-20)}` };
  });
  host = await startHost({
    bus,
    prefix,
    agents: [{ name: "assistant", tools: ["current_time"], needsApproval: ["current_time"], backend }],
  });
  server = await startUiServer({
    bus,
    prefix,
    natsConnection: bus.connection,
    doors: [
      createA2aDoor({
        agents: [
          {
            name: "assistant",
            description: "test agent",
            skills: [{ id: "current_time", name: "current_time", description: "time" }],
          },
        ],
      }),
    ],
  });
  base = new URL(server.url).origin;
}, 60_000);

afterAll(async () => {
  await server?.close();
  await host?.close();
  await bus?.close();
});

async function client(binding: "JSONRPC" | "HTTP+JSON"): Promise<Client> {
  return new ClientFactory({
    transports: [new JsonRpcTransportFactory(), new RestTransportFactory()],
    preferredTransports: [binding],
  }).createFromUrl(`${base}/a2a/assistant/.well-known/agent-card.json`, "");
}

function userText(text: string, extra: Partial<Message> = {}): Message {
  return {
    messageId: crypto.randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [
      { content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
    ...extra,
  };
}

function send(message: Message) {
  return { tenant: "", message, configuration: undefined, metadata: undefined };
}

function textOf(task: Task): string {
  const part = task.artifacts[0]?.parts[0]?.content;
  return part?.$case === "text" ? part.value : "";
}

describe("the A2A door", () => {
  it("serves an Agent Card with both bindings, streaming and a skill per tool", async () => {
    const response = await fetch(`${base}/a2a/assistant/.well-known/agent-card.json`);
    expect(response.status).toBe(200);
    const card = (await response.json()) as Record<string, unknown>;
    expect(card).toMatchObject({ name: "assistant", capabilities: { streaming: true } });
    expect(card.supportedInterfaces).toEqual([
      expect.objectContaining({ url: `${base}/a2a/assistant/jsonrpc`, protocolBinding: "JSONRPC" }),
      expect.objectContaining({ url: `${base}/a2a/assistant/rest`, protocolBinding: "HTTP+JSON" }),
    ]);
    expect((await fetch(`${base}/a2a/nobody/.well-known/agent-card.json`)).status).toBe(404);
  });

  it.each([
    "JSONRPC",
    "HTTP+JSON",
  ] as const)("SendMessage over %s completes a task that GetTask and ListTasks read from NATS", async (binding) => {
    const a2a = await client(binding);
    const result = (await a2a.sendMessage(send(userText(`hello over ${binding}`)))) as Task;
    expect(result.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(result)).toBe(`echo: ${`hello over ${binding}`.slice(-20)}`);
    const again = await a2a.getTask({ tenant: "", id: result.id });
    expect(again.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(again.contextId).toBe(result.contextId);
    const listed = await a2a.listTasks({
      tenant: "",
      contextId: result.contextId,
      status: TaskState.TASK_STATE_UNSPECIFIED,
      pageToken: "",
      statusTimestampAfter: undefined,
    });
    expect(listed.tasks.map((task) => task.id)).toEqual([result.id]);
    await expect(a2a.getTask({ tenant: "", id: "no-such-task" })).rejects.toThrow(/no task/);
  });

  it("streams a chat that waits for approval (INPUT_REQUIRED), then the approval answer completes it", async () => {
    const a2a = await client("JSONRPC");
    const items: StreamResponse[] = [];
    for await (const item of a2a.sendMessageStream(send(userText("what time is it?")))) items.push(item);
    expect(items[0]?.payload?.$case).toBe("task");
    const last = items.at(-1)?.payload;
    expect(last?.$case).toBe("statusUpdate");
    if (last?.$case !== "statusUpdate") return;
    expect(last.value.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const data = last.value.status?.message?.parts.find((part) => part.content?.$case === "data")?.content;
    const approval = (data?.$case === "data" ? data.value : {}) as {
      approval: { toolCallId: string; toolName: string };
    };
    expect(approval.approval.toolName).toBe("current_time");
    const taskId = last.value.taskId;
    // A plain text answer is refused with the shape it needs.
    await expect(a2a.sendMessage(send(userText("yes", { taskId })))).rejects.toThrow(/approval/);
    const answer = userText("", { taskId });
    answer.parts = [
      {
        content: {
          $case: "data",
          value: { approval: { toolCallId: approval.approval.toolCallId, approved: true } },
        },
        metadata: undefined,
        filename: "",
        mediaType: "application/json",
      },
    ];
    const done = (await a2a.sendMessage(send(answer))) as Task;
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(done)).toMatch(/^the clock said/);
  });

  it("answers malformed JSON-RPC with JSON-RPC error codes", async () => {
    const post = async (body: string) => {
      const response = await fetch(`${base}/a2a/assistant/jsonrpc`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      return (await response.json()) as { error?: { code: number } };
    };
    expect((await post("{not json")).error?.code).toBe(-32700);
    expect((await post(JSON.stringify({ jsonrpc: "1.0", id: 1, method: "GetTask" }))).error?.code).toBe(
      -32600,
    );
    expect(
      (await post(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "Nope", params: {} }))).error?.code,
    ).toBe(-32601);
    expect(
      (await post(JSON.stringify({ jsonrpc: "2.0", id: 3, method: "GetTask", params: { id: "missing" } })))
        .error?.code,
    ).toBe(-32001);
  });
});
