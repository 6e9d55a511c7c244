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

const TIME_SKILL = { id: "current_time", name: "current_time", description: "time" };
let bus: NatsBus;
let host: RunningHost;
let server: UiServer;
let base: string;
const prefix = uniqueRoot();

beforeAll(async () => {
  bus = await NatsBus.connect({ url: (await workerNatsServer()).url, name: "a2a door test" });
  const backend = new ScriptedBackend((request) => {
    const last = request.messages.at(-1);
    if (last?.role === "tool" && String(last.content).startsWith("echo:"))
      return { text: `relayed ${String(last.content)}` };
    if (last?.role === "tool") return { text: `the clock said ${String(last.content).slice(0, 4)}` };
    const text = String(last?.content ?? "");
    if (text.includes("time")) return { toolCalls: [{ name: "current_time" }] };
    // Streams a dot every 50 ms for half a minute unless cancelled.
    if (text.startsWith("stream:")) return { deltas: Array.from({ length: 600 }, () => "."), delayMs: 50 };
    if (text.startsWith("relay:")) {
      const target = { a2a: `${base}/a2a/assistant/.well-known/agent-card.json` };
      return { toolCalls: [{ name: "ask_agent", arguments: { target, message: text.slice(6) } }] };
    }
    return { text: `echo: ${text.slice(-20)}` };
  });
  host = await startHost({
    bus,
    prefix,
    agents: [
      { name: "assistant", tools: ["current_time"], needsApproval: ["current_time"], backend },
      { name: "asker", tools: ["ask_agent"], backend },
    ],
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
            skills: [TIME_SKILL],
          },
          // On the card, but no host serves it: its chats are refused.
          { name: "ghost", description: "nobody serves it", skills: [] },
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

  it("a running task is WORKING, GetTask answers while its events still flow, and CancelTask stops its chat", async () => {
    const a2a = await client("JSONRPC");
    const stream = a2a.sendMessageStream(send(userText("stream: dots please")));
    const states: TaskState[] = [];
    let taskId = "";
    for await (const item of stream) {
      const payload = item.payload;
      if (payload?.$case === "task") taskId = payload.value.id;
      const state =
        payload?.$case === "task"
          ? payload.value.status?.state
          : payload?.$case === "statusUpdate"
            ? payload.value.status?.state
            : undefined;
      if (state !== undefined) states.push(state);
      if (state === TaskState.TASK_STATE_WORKING) break;
    }
    expect(states.at(-1)).toBe(TaskState.TASK_STATE_WORKING);
    // Read back from the event log while the chat keeps adding to it: the read ends.
    const seen = await a2a.getTask({ tenant: "", id: taskId });
    expect(seen.status?.state).toBe(TaskState.TASK_STATE_WORKING);
    const cancelled = await a2a.cancelTask({ tenant: "", id: taskId, metadata: undefined });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await expect
      .poll(async () => (await a2a.getTask({ tenant: "", id: taskId })).status?.state)
      .toBe(TaskState.TASK_STATE_CANCELED);
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

  it("answers unknown agents and bad REST requests in the binding's own error shapes", async () => {
    const rpc = await fetch(`${base}/a2a/nobody/jsonrpc`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "GetTask", params: { id: "x" } }),
    });
    expect(rpc.status).toBe(404);
    expect(await rpc.json()).toMatchObject({ jsonrpc: "2.0", id: 7, error: { code: -32601 } });
    const rest = await fetch(`${base}/a2a/assistant/rest/message:send`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{oops",
    });
    expect(rest.status).toBe(400);
    expect(await rest.json()).toMatchObject({ error: { code: 400, status: "INVALID_ARGUMENT" } });
    const missing = await fetch(`${base}/a2a/assistant/rest/tasks/nope`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: 404 } });
  });

  it("another door on another connection answers for a task: its state is on NATS, not in a process", async () => {
    const first = await client("HTTP+JSON");
    const made = (await first.sendMessage(send(userText("what time is it now?")))) as Task;
    expect(made.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const otherBus = await NatsBus.connect({ url: (await workerNatsServer()).url, name: "a2a door two" });
    const other = await startUiServer({
      bus: otherBus,
      prefix,
      natsConnection: otherBus.connection,
      doors: [
        createA2aDoor({ agents: [{ name: "assistant", description: "test agent", skills: [TIME_SKILL] }] }),
      ],
    });
    try {
      const second = await new ClientFactory({
        transports: [new JsonRpcTransportFactory()],
      }).createFromUrl(`${new URL(other.url).origin}/a2a/assistant/.well-known/agent-card.json`, "");
      const seen = await second.getTask({ tenant: "", id: made.id });
      expect(seen.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      // SubscribeToTask replays from the log, then follows it: a cancel through the first door ends it.
      const items: StreamResponse[] = [];
      const following = (async () => {
        for await (const item of second.resubscribeTask({ tenant: "", id: made.id })) items.push(item);
      })();
      const cancelled = await first.cancelTask({ tenant: "", id: made.id, metadata: undefined });
      expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      await following;
      expect(items[0]?.payload?.$case).toBe("task");
      const last = items.at(-1)?.payload;
      expect(last?.$case === "statusUpdate" ? last.value.status?.state : undefined).toBe(
        TaskState.TASK_STATE_CANCELED,
      );
      await expect(second.cancelTask({ tenant: "", id: made.id, metadata: undefined })).rejects.toThrow(
        /already canceled/,
      );
    } finally {
      await other.close();
      await otherBus.close();
    }
  });

  it("cancels a task queued behind another chat of its context alone: it never runs, the running one goes on", async () => {
    const a2a = await client("JSONRPC");
    const started: Array<string | undefined> = [];
    const watch = bus.subscribe(`${prefix}.events.assistant.queued-ctx.ChatStarted`, (message) => {
      started.push((JSON.parse(message.data) as { requestId?: string }).requestId);
    });
    try {
      const running = (await a2a.sendMessage(
        send(userText("what time is it, first?", { contextId: "queued-ctx" })),
      )) as Task;
      expect(running.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const queued = (await a2a.sendMessage({
        ...send(userText("me second", { contextId: "queued-ctx" })),
        configuration: {
          acceptedOutputModes: [],
          taskPushNotificationConfig: undefined,
          returnImmediately: true,
        },
      })) as Task;
      expect(queued.status?.state).toBe(TaskState.TASK_STATE_SUBMITTED);
      const cancelled = await a2a.cancelTask({ tenant: "", id: queued.id, metadata: undefined });
      expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
      expect((await a2a.getTask({ tenant: "", id: queued.id })).status?.state).toBe(
        TaskState.TASK_STATE_CANCELED,
      );
      // The running chat still waits for its approval; approved, it completes.
      const held = await a2a.getTask({ tenant: "", id: running.id });
      expect(held.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
      const data = held.status?.message?.parts.find((part) => part.content?.$case === "data")?.content;
      const toolCallId = (data?.$case === "data" ? data.value : {}) as { approval?: { toolCallId: string } };
      const answer = userText("", { taskId: running.id });
      answer.parts = [
        {
          content: {
            $case: "data",
            value: { approval: { toolCallId: toolCallId.approval?.toolCallId, approved: true } },
          },
          metadata: undefined,
          filename: "",
          mediaType: "application/json",
        },
      ];
      const done = (await a2a.sendMessage(send(answer))) as Task;
      expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
      // Only the first task's chat ever started.
      await bus.flush();
      expect(started.filter((id) => id !== undefined)).toEqual([running.id]);
    } finally {
      watch.unsubscribe();
    }
  });

  it("counts only streaming JSON-RPC calls against the stream cap: GetTask still answers while the one stream is open", async () => {
    const first = await client("JSONRPC");
    const held = (await first.sendMessage(send(userText("what time is it, capped?")))) as Task;
    expect(held.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const capped = await startUiServer({
      bus,
      prefix,
      natsConnection: bus.connection,
      maxStreams: 1,
      doors: [
        createA2aDoor({ agents: [{ name: "assistant", description: "test agent", skills: [TIME_SKILL] }] }),
      ],
    });
    const rpc = (body: Record<string, unknown>, signal?: AbortSignal) =>
      fetch(`${new URL(capped.url).origin}/a2a/assistant/jsonrpc`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", ...body }),
        ...(signal === undefined ? {} : { signal }),
      });
    const streamGone = new AbortController();
    try {
      // The one stream this server allows: SubscribeToTask on the task waiting for approval.
      const stream = await rpc(
        { id: 1, method: "SubscribeToTask", params: { id: held.id } },
        streamGone.signal,
      );
      expect(stream.headers.get("content-type")).toMatch(/^text\/event-stream/);
      expect(capped.stats().openStreams).toBe(1);
      const got = await rpc({ id: 2, method: "GetTask", params: { id: held.id } });
      expect(got.status).toBe(200);
      expect(await got.json()).toMatchObject({ id: 2, result: { id: held.id } });
      const second = await rpc({ id: 3, method: "SubscribeToTask", params: { id: held.id } });
      expect(second.status).toBe(503);
      expect(await second.json()).toMatchObject({
        jsonrpc: "2.0",
        id: 3,
        error: { code: -32603, message: /overloaded/ },
      });
      expect(capped.stats().refused.streams).toBe(1);
    } finally {
      streamGone.abort();
      await capped.close();
      await first.cancelTask({ tenant: "", id: held.id, metadata: undefined });
    }
  });

  it("fails a task whose chat request is refused (no host serves the agent), with the reason", async () => {
    const ghost = await new ClientFactory({ transports: [new JsonRpcTransportFactory()] }).createFromUrl(
      `${base}/a2a/ghost/.well-known/agent-card.json`,
      "",
    );
    const task = (await ghost.sendMessage(send(userText("anyone there?")))) as Task;
    expect(task.status?.state).toBe(TaskState.TASK_STATE_FAILED);
    const part = task.status?.message?.parts[0]?.content;
    expect(part?.$case === "text" ? part.value : "").toMatch(/unknown_agent/);
    expect((await ghost.getTask({ tenant: "", id: task.id })).status?.state).toBe(
      TaskState.TASK_STATE_FAILED,
    );
  });

  it("ask_agent with target { a2a } asks an A2A agent (here this door) with the SDK's client", async () => {
    const reply = await bus.request(
      `${prefix}.agents.asker.chat`,
      JSON.stringify({ session: "relay", text: "relay:ping over a2a" }),
      { timeoutMs: 20_000 },
    );
    expect(JSON.parse(reply.data)).toMatchObject({ ok: true, result: "relayed echo: ping over a2a" });
  });
});

describe("the A2A door without JetStream", () => {
  it("shows the card, and answers task methods with UnsupportedOperation (a task's state needs the event log)", async () => {
    const { LocalBus } = await import("../../src/bus/local-bus.js");
    const local = await startUiServer({
      bus: new LocalBus(),
      doors: [createA2aDoor({ agents: [{ name: "assistant", description: "local", skills: [] }] })],
    });
    try {
      const origin = new URL(local.url).origin;
      expect((await fetch(`${origin}/a2a/assistant/.well-known/agent-card.json`)).status).toBe(200);
      const response = await fetch(`${origin}/a2a/assistant/jsonrpc`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: "x" } }),
      });
      expect(await response.json()).toMatchObject({
        id: 1,
        error: { code: -32004, message: /NATS with JetStream/ },
      });
    } finally {
      await local.close();
    }
  });
});
