import { type BaseEvent, EventType, HttpAgent, type Message } from "@ag-ui/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { NatsBus } from "../../../src/bus/nats-bus.js";
import { createAguiDoor } from "../../../src/doors/agui/agui-door.js";
import { type RunningHost, startHost } from "../../../src/host/start-host.js";
import { ScriptedBackend } from "../../../src/testing/index.js";
import { defineTool } from "../../../src/tools/define-tool.js";
import { startUiServer, type UiServer } from "../../../src/ui/ui-server.js";
import { uniqueRoot } from "../../bus/bus-helpers.js";
import { workerNatsServer } from "../../support/nats-server.js";

/**
 * The AG-UI door, black-box: `@ag-ui/client`'s HttpAgent against `POST /agui/<agent>` of a UI
 * server whose agents run in a real host on nats-server (events from the JetStream event log).
 */

let bus: NatsBus;
let host: RunningHost;
let server: UiServer;
let origin: string;

const STORY = [
  "Once ",
  "upon ",
  "a ",
  "time ",
  "there ",
  "was ",
  "a ",
  "cat ",
  "that ",
  "looked ",
  "things ",
  "up.",
];

const lookup = defineTool({
  name: "lookup",
  description: "Looks a word up.",
  parameters: z.object({ word: z.string() }),
  execute: ({ word }) => `${word}: a word`,
});
const deploy = defineTool({
  name: "deploy",
  description: "Deploys.",
  parameters: z.object({ target: z.string() }),
  needsApproval: true,
  execute: ({ target }) => `deployed ${target}`,
});

const model = new ScriptedBackend((request) => {
  const last = request.messages.at(-1);
  if (last?.role === "tool")
    return { text: `Done: ${String(last.content)}`, deltas: ["Done: ", String(last.content)] };
  const text = String(last?.content ?? "");
  if (text.startsWith("deploy")) {
    return {
      toolCalls: [{ id: `call_${text.split(" ")[1]}`, name: "deploy", arguments: { target: "prod" } }],
    };
  }
  if (text.startsWith("story")) return { text: STORY.join(""), deltas: STORY };
  return {
    reasoning: "I should look it up.",
    toolCalls: [
      { id: `call_${text.split(" ").at(-1)}`, name: "lookup", arguments: { word: text.split(" ").at(-1) } },
    ],
  };
});

beforeAll(async () => {
  const nats = await workerNatsServer();
  bus = await NatsBus.connect({ url: nats.url, name: "agui-door-test" });
  const prefix = uniqueRoot();
  host = await startHost({
    bus,
    prefix,
    agents: [{ name: "helper", systemPrompt: "You help.", tools: [lookup, deploy], backend: model }],
  });
  server = await startUiServer({ bus, prefix, natsConnection: bus.connection, doors: [createAguiDoor()] });
  origin = new URL(server.url).origin;
});

afterAll(async () => {
  await server?.close();
  await host?.close();
  await bus?.close();
});

function agentFor(threadId: string, headers: Record<string, string> = {}, fetcher?: typeof fetch): HttpAgent {
  return new HttpAgent({
    url: `${origin}/agui/helper`,
    threadId,
    headers,
    ...(fetcher === undefined ? {} : { fetch: fetcher }),
  });
}

/** Runs the agent once and returns every event it received. */
async function run(
  agent: HttpAgent,
  parameters: Parameters<HttpAgent["runAgent"]>[0] = {},
): Promise<BaseEvent[]> {
  const events: BaseEvent[] = [];
  await agent.runAgent(parameters, { onEvent: ({ event }) => void events.push(event) });
  return events;
}

function say(agent: HttpAgent, id: string, content: string): void {
  agent.addMessage({ id, role: "user", content });
}

/** Reads an SSE body into its messages (`id` and parsed `data`); stops after `limit` messages with an id. */
async function readSse(
  response: Response,
  limit = Number.POSITIVE_INFINITY,
): Promise<Array<{ id: string | undefined; event: BaseEvent }>> {
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  const messages: Array<{ id: string | undefined; event: BaseEvent }> = [];
  let buffer = "";
  let withIds = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    const blocks = buffer.split("\n\n");
    buffer = blocks.pop() ?? "";
    for (const block of blocks) {
      const lines = block.split("\n");
      const data = lines.filter((line) => line.startsWith("data: ")).map((line) => line.slice(6));
      if (data.length === 0) continue;
      const id = lines.find((line) => line.startsWith("id: "))?.slice(4);
      messages.push({ id, event: JSON.parse(data.join("\n")) as BaseEvent });
      if (id !== undefined) withIds += 1;
      if (withIds >= limit) {
        await reader.cancel();
        return messages;
      }
    }
  }
  return messages;
}

function post(body: unknown, headers: Record<string, string> = {}, agent = "helper"): Promise<Response> {
  return fetch(`${origin}/agui/${agent}`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const types = (events: BaseEvent[]) => events.map((event) => event.type);

describe("the AG-UI door", () => {
  it("streams a chat as AG-UI events: steps, reasoning, a tool call with its result, text and state", async () => {
    const agent = agentFor("thread-tools");
    say(agent, "u1", "look up cat");
    const events = await run(agent);
    const kinds = types(events);
    expect(kinds.slice(0, 3)).toEqual([
      EventType.RUN_STARTED,
      EventType.MESSAGES_SNAPSHOT,
      EventType.STATE_SNAPSHOT,
    ]);
    expect(kinds.at(-1)).toBe(EventType.RUN_FINISHED);
    expect(events.at(-1)).toMatchObject({ outcome: { type: "success" }, result: "Done: cat: a word" });
    expect(
      events.filter((event) => event.type === EventType.STEP_STARTED).map((event) => event.stepName),
    ).toEqual(["iteration 1", "tool lookup call_cat", "iteration 2"]);
    expect(kinds).toContain(EventType.REASONING_MESSAGE_CONTENT);
    expect(events.find((event) => event.type === EventType.TOOL_CALL_ARGS)).toMatchObject({
      toolCallId: "call_cat",
      delta: '{"word":"cat"}',
    });
    expect(events.find((event) => event.type === EventType.TOOL_CALL_RESULT)).toMatchObject({
      toolCallId: "call_cat",
      content: "cat: a word",
    });
    expect(kinds.filter((kind) => kind === EventType.STATE_DELTA).length).toBeGreaterThan(0);
    // What the client made of it: the conversation and the statecharts' states.
    const roles = agent.messages.map((message) => message.role);
    expect(roles).toEqual(["user", "reasoning", "assistant", "tool", "assistant"]);
    expect(agent.messages.find((message) => message.role === "tool")).toMatchObject({
      content: "cat: a word",
    });
    expect(agent.messages.at(-1)).toMatchObject({ role: "assistant", content: "Done: cat: a word" });
    expect((agent.state as { statechart: Record<string, unknown> }).statechart).toHaveProperty("chat");

    // The next run on the thread opens with the thread's history, rebuilt from the event log.
    say(agent, "u2", "look up dog");
    const second = await run(agent);
    const snapshot = second.find((event) => event.type === EventType.MESSAGES_SNAPSHOT) as unknown as {
      messages: Message[];
    };
    expect(snapshot.messages.map((message) => [message.role, message.content])).toEqual([
      ["user", "look up cat"],
      ["assistant", undefined],
      ["tool", "cat: a word"],
      ["assistant", "Done: cat: a word"],
      ["user", "look up dog"],
    ]);
    const ids = agent.messages.map((message) => message.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(agent.messages.at(-1)).toMatchObject({ role: "assistant", content: "Done: dog: a word" });
  });

  it("ends a run on an approval with the interrupt outcome; resume approves it once, or denies it", async () => {
    const agent = agentFor("thread-approval");
    say(agent, "u1", "deploy one");
    const first = await run(agent);
    const finished = first.at(-1) as {
      type: string;
      outcome: { type: string; interrupts: Array<{ id: string; toolCallId: string }> };
    };
    expect(finished.type).toBe(EventType.RUN_FINISHED);
    expect(finished.outcome.type).toBe("interrupt");
    expect(finished.outcome.interrupts).toHaveLength(1);
    const [interrupt] = finished.outcome.interrupts;
    expect(interrupt).toMatchObject({ toolCallId: "call_one", reason: "tool_approval" });
    expect(agent.pendingInterrupts.map((pending) => pending.id)).toEqual([interrupt!.id]);

    const resume = [{ interruptId: interrupt!.id, status: "resolved" as const, payload: { approved: true } }];
    const resumed = await run(agent, { resume });
    expect(resumed.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, outcome: { type: "success" } });
    expect(resumed.find((event) => event.type === EventType.TOOL_CALL_RESULT)).toMatchObject({
      toolCallId: "call_one",
      content: "deployed prod",
    });
    // Announced by the run that asked: the resumed run does not start the call again.
    expect(types(resumed)).not.toContain(EventType.TOOL_CALL_START);
    expect(agent.messages.at(-1)).toMatchObject({ content: "Done: deployed prod" });

    // The same answer again: the approval was used up.
    const again = await post({ threadId: "thread-approval", runId: "again", messages: [], resume });
    const replayed = await readSse(again);
    expect(replayed.map((message) => message.event.type)).toEqual([
      EventType.RUN_STARTED,
      EventType.RUN_ERROR,
    ]);
    expect(replayed[1]!.event.message).toMatch(/waiting for approval/);

    say(agent, "u2", "deploy two");
    const second = await run(agent);
    const held = (second.at(-1) as typeof finished).outcome.interrupts[0]!;
    const denied = await run(agent, {
      resume: [
        { interruptId: held.id, status: "resolved", payload: { approved: false, reason: "not today" } },
      ],
    });
    expect(denied.find((event) => event.type === EventType.TOOL_CALL_RESULT)).toMatchObject({
      toolCallId: "call_two",
      content: JSON.stringify({ error: "denied", reason: "not today" }),
    });
    expect(denied.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, outcome: { type: "success" } });
  });

  it("a client that reconnects with its last event id gets every later event once", async () => {
    const input = {
      threadId: "thread-reconnect",
      runId: "run-1",
      messages: [{ id: "u1", role: "user", content: "story please" }],
    };
    // Cut off after six events.
    const cut = await readSse(await post(input), 6);
    const withIds = cut.filter((message) => message.id !== undefined);
    expect(withIds).toHaveLength(6);
    const lastId = withIds.at(-1)!.id!;

    // HttpAgent picks up with Last-Event-ID; its own checks of the event order hold.
    const seenIds: string[] = [];
    const recordingFetch: typeof fetch = async (url, init) => {
      const response = await fetch(url, init);
      const [forAgent, forTest] = response.body!.tee();
      void readSse(new Response(forTest)).then((messages) => {
        for (const message of messages) if (message.id !== undefined) seenIds.push(message.id);
      });
      return new Response(forAgent, { status: response.status, headers: response.headers });
    };
    const agent = agentFor("thread-reconnect", { "Last-Event-ID": lastId }, recordingFetch);
    agent.setMessages(input.messages as Message[]);
    const rest = await run(agent, { runId: "run-1" });
    expect(rest.at(-1)).toMatchObject({ type: EventType.RUN_FINISHED, outcome: { type: "success" } });
    await expect.poll(() => seenIds.length).toBeGreaterThan(0);

    // The whole run, read again from its first event: the two parts are exactly it.
    const full = await readSse(await post(input, { "last-event-id": withIds[0]!.id! }));
    const allIds = [
      withIds[0]!.id!,
      ...full.filter((message) => message.id !== undefined).map((message) => message.id!),
    ];
    expect([...withIds.map((message) => message.id!), ...seenIds]).toEqual(allIds);
    const text = [...cut.map((message) => message.event), ...rest]
      .filter((event) => event.type === EventType.TEXT_MESSAGE_CONTENT)
      .map((event) => event.delta)
      .join("");
    expect(text).toBe(STORY.join(""));
  });

  it("answers bad input with RUN_ERROR and an unknown agent with 404", async () => {
    const notJson = await readSse(await post("{not json"));
    expect(notJson.map((message) => message.event)).toEqual([
      { type: EventType.RUN_ERROR, code: "bad_request", message: "the body is not valid JSON" },
    ]);
    const noThread = await readSse(await post({ runId: "r", messages: [] }));
    expect(noThread[0]!.event).toMatchObject({ type: EventType.RUN_ERROR, code: "bad_request" });
    expect(noThread[0]!.event.message).toMatch(/threadId/);
    const badThread = await readSse(
      await post({ threadId: "a.b", runId: "r", messages: [{ id: "1", role: "user", content: "hi" }] }),
    );
    expect(badThread[0]!.event.message).toMatch(/threadId must be a session name/);
    const badId = await readSse(
      await post(
        { threadId: "t", runId: "r", messages: [{ id: "1", role: "user", content: "hi" }] },
        { "last-event-id": "x" },
      ),
    );
    expect(badId[0]!.event).toMatchObject({ type: EventType.RUN_ERROR, code: "bad_request" });

    // Through the client: no user message to send is the protocol's RUN_ERROR.
    const agent = agentFor("thread-bad");
    const errors: string[] = [];
    await agent
      .runAgent({}, { onRunErrorEvent: ({ event }) => void errors.push(event.message) })
      .catch(() => undefined);
    expect(errors).toEqual(["the last message must be the user's: its text is what the agent is sent"]);

    const unknown = await post(
      { threadId: "t", runId: "r", messages: [{ id: "1", role: "user", content: "hi" }] },
      {},
      "nobody",
    );
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ ok: false, error: { code: "not_found" } });
  });
});
