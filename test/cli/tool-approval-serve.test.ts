import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Subscription } from "../../src/bus/bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import {
  chatSubject,
  controlSubject,
  sessionEventsPattern,
  sessionHeartbeatSubject,
} from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { turn } from "../../src/testing/index.js";
import { uniqueRoot } from "../bus/bus-helpers.js";
import {
  killServeProcesses,
  type RunningServe,
  startServe,
  startServeProcess,
  waitUntilServing,
} from "../host/running-serve.js";
import {
  type FakeProvider,
  runBinary,
  startBinary,
  startFakeProvider,
  textTurn,
  toolResults,
  waitFor,
} from "../support/cli.js";
import { type NatsServer, workerNatsServer } from "../support/nats-server.js";

/**
 * `agentloop serve` with an agent whose `current_time` calls need approval; the
 * decisions go over the control subject of a real nats-server. The pending approval survives the
 * host being killed: the next host on the same database takes the decision, runs the tool once and
 * finishes the chat (its requester gone: the events tell). A host that is killed or signalled is
 * a real process (dist/); the others run `serve` in this process, stopped as by Ctrl-C.
 */

let server: NatsServer;
let bus: NatsBus;
let directory: string;
let agentsFile: string;
const providers: FakeProvider[] = [];
const subscriptions: Subscription[] = [];
/** The hosts running in this process, stopped after each test (stopping twice is harmless). */
const servedHere: RunningServe[] = [];

/** `agentloop serve ...args` in this process (see startServe), stopped after the test. */
function serveHere(args: readonly string[], env: Record<string, string>): RunningServe {
  const serve = startServe(args, env);
  servedHere.push(serve);
  return serve;
}

beforeAll(async () => {
  server = await workerNatsServer();
  bus = await NatsBus.connect({ url: server.url, name: "tool-approval-test" });
  directory = await mkdtemp(join(tmpdir(), "agentloop-approval-"));
  agentsFile = join(directory, "agents.json");
  await writeFile(
    agentsFile,
    JSON.stringify({
      agents: [{ name: "assistant", tools: ["current_time"], needsApproval: ["current_time"] }],
    }),
  );
});

afterEach(async () => {
  killServeProcesses();
  await Promise.all(servedHere.splice(0).map((serve) => serve.stop()));
  for (const subscription of subscriptions.splice(0)) subscription.unsubscribe();
});

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

const timeCall = turn({ toolCalls: [{ id: "call_1", name: "current_time", arguments: "{}" }] });

function collectEvents(prefix: string, session: string): AgentEvent[] {
  const events: AgentEvent[] = [];
  subscriptions.push(
    bus.subscribe(sessionEventsPattern(prefix, "assistant", session), (message) => {
      events.push(JSON.parse(message.data) as AgentEvent);
    }),
  );
  return events;
}

function kinds(events: readonly AgentEvent[], kind: AgentEvent["kind"]): AgentEvent[] {
  return events.filter((event) => event.kind === kind);
}

async function control(prefix: string, payload: Record<string, unknown>): Promise<unknown> {
  const reply = await bus.request(controlSubject(prefix, "assistant"), JSON.stringify(payload), {
    timeoutMs: 30_000,
  });
  return JSON.parse(reply.data);
}

function chat(prefix: string, session: string, text: string, id?: string): Promise<unknown> {
  const body = { session, text, ...(id === undefined ? {} : { id }) };
  return bus
    .request(chatSubject(prefix, "assistant"), JSON.stringify(body), { timeoutMs: 60_000 })
    .then((reply) => JSON.parse(reply.data));
}

describe("tool approval over NATS", () => {
  it("approve runs the held call; deny sends the reason to the model", { timeout: 90_000 }, async () => {
    const prefix = uniqueRoot();
    const model = await provider("openai-chat", [
      timeCall,
      textTurn("It is noon."),
      timeCall,
      textTurn("I was not allowed to look."),
    ]);
    const serve = serveHere(
      ["--nats", server.url, "--prefix", prefix, "--agents", agentsFile, ...model.flags],
      model.env,
    );
    await waitUntilServing(bus, prefix, serve);
    const events = collectEvents(prefix, "s1");
    await bus.flush();

    const approved = chat(prefix, "s1", "what time is it?");
    await waitFor(() => kinds(events, "ToolApprovalRequested").length === 1, 60_000);
    expect(kinds(events, "ToolApprovalRequested")[0]).toMatchObject({
      toolName: "current_time",
      toolCallId: "call_1",
      arguments: "{}",
    });
    expect(kinds(events, "ToolCallStarted")).toEqual([]);
    expect(await control(prefix, { session: "s1", command: "approve", toolCallId: "nope" })).toMatchObject({
      ok: false,
      error: { code: "bad_request" },
    });
    expect(await control(prefix, { session: "s1", command: "approve", toolCallId: "call_1" })).toEqual({
      ok: true,
    });
    expect(await approved).toMatchObject({ ok: true, result: "It is noon." });
    expect(kinds(events, "ToolCallCompleted")).toHaveLength(1);
    expect(await control(prefix, { session: "s1", command: "approve", toolCallId: "call_1" })).toMatchObject({
      ok: false,
      error: { code: "bad_request" },
    });

    const denied = chat(prefix, "s1", "and now?");
    await waitFor(() => kinds(events, "ToolApprovalRequested").length === 2, 60_000);
    expect(
      await control(prefix, { session: "s1", command: "deny", toolCallId: "call_1", reason: "not now" }),
    ).toEqual({ ok: true });
    expect(await denied).toMatchObject({ ok: true, result: "I was not allowed to look." });
    expect(kinds(events, "ToolCallCompleted")).toHaveLength(1);
    expect(toolResults("openai-chat", model.bodies()[3]!).at(-1)).toEqual({
      callId: "call_1",
      output: JSON.stringify({ error: "denied", reason: "not now" }),
    });
    expect(kinds(events, "ToolApprovalResolved").map((event) => event)).toMatchObject([
      { toolCallId: "call_1", approved: true },
      { toolCallId: "call_1", approved: false, reason: "not now" },
    ]);
    expect((await serve.stop()).code).toBe(0);
  });

  it(
    "survives a killed host: after the restart, approve runs the tool once and the chat completes",
    { timeout: 120_000 },
    async () => {
      const prefix = uniqueRoot();
      const db = join(directory, "restart.db");
      const common = ["--nats", server.url, "--prefix", prefix, "--agents", agentsFile, "--db", db];
      const asking = await provider("openai-chat", [timeCall]);
      const serve = startServeProcess([...common, ...asking.flags], asking.env);
      await waitUntilServing(bus, prefix, serve);
      const events = collectEvents(prefix, "s2");
      await bus.flush();

      // The requester goes away with the host.
      void chat(prefix, "s2", "what time is it?").catch(() => {});
      await waitFor(() => kinds(events, "ToolApprovalRequested").length === 1, 60_000);
      const chatId = kinds(events, "ToolApprovalRequested")[0]!.chatId;
      serve.child.kill("SIGKILL");
      await serve.run;

      const answering = await provider("openai-chat", [textTurn("It is noon, after the restart.")]);
      const again = serveHere([...common, ...answering.flags], answering.env);
      await waitUntilServing(bus, prefix, again);
      expect(await control(prefix, { session: "s2", command: "approve", toolCallId: "call_1" })).toEqual({
        ok: true,
      });
      await waitFor(() => kinds(events, "ChatCompleted").length === 1, 60_000);
      expect(kinds(events, "ChatCompleted")[0]).toMatchObject({
        chatId,
        result: "It is noon, after the restart.",
      });
      expect(kinds(events, "ToolCallCompleted")).toMatchObject([{ chatId, toolCallId: "call_1" }]);
      // The model got the conversation with the tool's result.
      expect(answering.bodies()).toHaveLength(1);
      expect(toolResults("openai-chat", answering.bodies()[0]!).map((result) => result.callId)).toEqual([
        "call_1",
      ]);
      // Used once.
      expect(
        await control(prefix, { session: "s2", command: "approve", toolCallId: "call_1" }),
      ).toMatchObject({
        ok: false,
      });
      // The history holds the whole chat: the next message follows it.
      const next = await provider("openai-chat", [textTurn("You asked for the time.")]);
      expect((await again.stop()).code).toBe(0);
      const third = serveHere([...common, ...next.flags], next.env);
      await waitUntilServing(bus, prefix, third);
      expect(await chat(prefix, "s2", "what did I ask?")).toMatchObject({ ok: true });
      const roles = (next.bodies()[0]?.messages as Array<{ role: string }>).map((message) => message.role);
      expect(roles).toEqual(["system", "user", "assistant", "tool", "assistant", "user"]);
      expect((await third.stop()).code).toBe(0);
    },
  );

  it.each([
    ["a SQLite file", (prefix: string) => ["--db", join(directory, `${prefix}.db`)]],
    ["JetStream", () => ["--history", "nats"]],
  ])(
    "a retry of a chat whose hosts were killed while it awaited approval waits for the decision and gets the answer (history in %s)",
    { timeout: 180_000 },
    async (_where, storage) => {
      const prefix = uniqueRoot();
      const common = ["--nats", server.url, "--prefix", prefix, "--agents", agentsFile, ...storage(prefix)];
      const asking = await provider("openai-chat", [timeCall]);
      const first = startServeProcess([...common, ...asking.flags], asking.env);
      await waitUntilServing(bus, prefix, first);
      const events = collectEvents(prefix, "s5");
      await bus.flush();

      // The requester's connection goes away with the host; it asks again with the same id.
      void chat(prefix, "s5", "what time is it?", "req-held").catch(() => {});
      await waitFor(() => kinds(events, "ToolApprovalRequested").length === 1, 60_000);
      first.child.kill("SIGKILL");
      await first.run;

      // The next host is killed too, with a retry waiting on it: the wait outlives it.
      const idle = await provider("openai-chat", []);
      const second = startServeProcess([...common, ...idle.flags], idle.env);
      await waitUntilServing(bus, prefix, second);
      // Answered once the session is up on the host (after the dead host's lease ran out): a
      // decision refused for other arguments than the ones asked.
      const bringUp = async () =>
        expect(
          await control(prefix, {
            session: "s5",
            command: "deny",
            toolCallId: "call_1",
            arguments: '{"x":1}',
          }),
        ).toMatchObject({ ok: false, error: { code: "bad_request" } });
      await bringUp();
      let beats = 0;
      subscriptions.push(
        bus.subscribe(sessionHeartbeatSubject(prefix, "assistant", "s5"), () => {
          beats += 1;
        }),
      );
      await bus.flush();
      // Its answer is lost with the host (the request times out later, unheard).
      void chat(prefix, "s5", "what time is it?", "req-held").catch(() => {});
      // A beat when the host took the request, the next one an interval later: it is still waiting.
      await waitFor(() => beats >= 2, 60_000);
      second.child.kill("SIGKILL");
      await second.run;
      expect(idle.bodies()).toEqual([]);

      // A host stopped gracefully with a retry waiting answers it `unavailable` (ask again): the
      // approval stays pending for the next host.
      const stopping = serveHere([...common, ...idle.flags], idle.env);
      await waitUntilServing(bus, prefix, stopping);
      await bringUp();
      beats = 0;
      const interrupted = chat(prefix, "s5", "what time is it?", "req-held");
      await waitFor(() => beats >= 2, 60_000);
      expect((await stopping.stop()).code).toBe(0);
      expect(await interrupted).toMatchObject({
        ok: false,
        error: { code: "unavailable", message: expect.stringMatching(/the approval stays pending/) },
        id: "req-held",
      });
      expect(idle.bodies()).toEqual([]);

      const answering = await provider("openai-chat", [textTurn("It is noon, after the restart.")]);
      const third = serveHere([...common, ...answering.flags], answering.env);
      await waitUntilServing(bus, prefix, third);
      const retried = chat(prefix, "s5", "what time is it?", "req-held");
      await bus.flush();
      expect(await control(prefix, { session: "s5", command: "approve", toolCallId: "call_1" })).toEqual({
        ok: true,
      });
      const reply = await retried;
      expect(reply).toMatchObject({
        ok: true,
        session: "s5",
        result: "It is noon, after the restart.",
        id: "req-held",
      });
      // One chat, run once: the retries did not start chats of their own.
      expect(kinds(events, "ChatStarted")).toHaveLength(1);
      expect(kinds(events, "ChatCompleted")).toHaveLength(1);
      expect(kinds(events, "ToolCallCompleted")).toHaveLength(1);
      expect(answering.bodies()).toHaveLength(1);
      // A later retry gets the stored reply.
      expect(await chat(prefix, "s5", "what time is it?", "req-held")).toEqual(reply);
      expect(answering.bodies()).toHaveLength(1);
    },
  );

  it(
    "remote `agentloop chat` asks on the terminal: a piped y approves, no input says how to answer",
    {
      timeout: 90_000,
    },
    async () => {
      const prefix = uniqueRoot();
      const model = await provider("openai-chat", [
        timeCall,
        textTurn("It is noon."),
        timeCall,
        textTurn("Approved elsewhere."),
      ]);
      const serve = serveHere(
        ["--nats", server.url, "--prefix", prefix, "--agents", agentsFile, ...model.flags],
        model.env,
      );
      await waitUntilServing(bus, prefix, serve);
      const remote = ["chat", "--nats", server.url, "--prefix", prefix, "--session", "s3"];

      const answered = await runBinary([...remote, "what time is it?"], { input: "y\n", timeoutMs: 60_000 });
      expect(answered).toMatchObject({ code: 0, stdout: "It is noon.\n" });
      expect(answered.stderr).toBe("approve current_time({})? [y/N] ");
      expect(toolResults("openai-chat", model.bodies()[1]!)).toHaveLength(1);
      expect(toolResults("openai-chat", model.bodies()[1]!)[0]?.output).not.toMatch(/denied/);

      // No answer on stdin: it says where to send one, and waits for it.
      const events = collectEvents(prefix, "s3");
      await bus.flush();
      const waiting = startBinary([...remote, "and now?"], { timeoutMs: 60_000 });
      let stderr = "";
      waiting.child.stderr?.on("data", (text: string) => {
        stderr += text;
      });
      await waitFor(() => stderr.includes("waits for approval"), 60_000);
      expect(stderr).toContain(
        `run \`agentloop approve assistant s3 call_1\` (or deny), or send {"session":"s3","command":"approve","toolCallId":"call_1"} to ${controlSubject(prefix, "assistant")}`,
      );
      expect(kinds(events, "ToolCallStarted")).toEqual([]);
      expect(await control(prefix, { session: "s3", command: "approve", toolCallId: "call_1" })).toEqual({
        ok: true,
      });
      expect(await waiting.result).toMatchObject({ code: 0, stdout: "Approved elsewhere.\n" });
      expect((await serve.stop()).code).toBe(0);
    },
  );

  it(
    "a retry of a chat parked by SIGTERM while it awaited approval waits on the next host for the decision",
    { timeout: 120_000 },
    async () => {
      const prefix = uniqueRoot();
      const db = join(directory, "parked-retry.db");
      const common = ["--nats", server.url, "--prefix", prefix, "--agents", agentsFile, "--db", db];
      const asking = await provider("openai-chat", [timeCall]);
      const serve = startServeProcess([...common, ...asking.flags], asking.env);
      await waitUntilServing(bus, prefix, serve);
      const events = collectEvents(prefix, "s6");
      await bus.flush();

      const parked = chat(prefix, "s6", "what time is it?", "req-parked");
      await waitFor(() => kinds(events, "ToolApprovalRequested").length === 1, 60_000);
      serve.child.kill("SIGTERM");
      expect(await parked).toMatchObject({ ok: false, error: { code: "cancelled" }, id: "req-parked" });
      expect((await serve.run).code).toBe(0);

      // That `cancelled` is not the id's last word: the chat goes on on the next host.
      const answering = await provider("openai-chat", [textTurn("Noon.")]);
      const again = serveHere([...common, ...answering.flags], answering.env);
      await waitUntilServing(bus, prefix, again);
      const retried = chat(prefix, "s6", "what time is it?", "req-parked");
      await bus.flush();
      expect(await control(prefix, { session: "s6", command: "approve", toolCallId: "call_1" })).toEqual({
        ok: true,
      });
      expect(await retried).toMatchObject({ ok: true, session: "s6", result: "Noon.", id: "req-parked" });
      expect(kinds(events, "ChatStarted")).toHaveLength(1);
      expect(kinds(events, "ChatCompleted")).toHaveLength(1);
      expect(answering.bodies()).toHaveLength(1);
    },
  );

  it(
    "a host stopped with SIGTERM parks the approval (its requester answered cancelled); stop cancels it",
    { timeout: 120_000 },
    async () => {
      const prefix = uniqueRoot();
      const db = join(directory, "sigterm.db");
      const common = ["--nats", server.url, "--prefix", prefix, "--agents", agentsFile, "--db", db];
      const asking = await provider("openai-chat", [timeCall]);
      const serve = startServeProcess([...common, ...asking.flags], asking.env);
      await waitUntilServing(bus, prefix, serve);
      const events = collectEvents(prefix, "s4");
      await bus.flush();

      const parked = chat(prefix, "s4", "what time is it?");
      await waitFor(() => kinds(events, "ToolApprovalRequested").length === 1, 60_000);
      serve.child.kill("SIGTERM");
      expect(await parked).toEqual({
        ok: false,
        error: {
          code: "cancelled",
          message: "the host stopped while a tool call awaited approval; the approval stays pending",
        },
      });
      expect((await serve.run).code).toBe(0);
      // Parked, not cancelled: no ChatFailed, and the call never ran.
      expect(kinds(events, "ChatFailed")).toEqual([]);
      expect(kinds(events, "ToolCallStarted")).toEqual([]);

      // The next host: `stop` cancels the parked approval; the call gets a cancelled result.
      const next = await provider("openai-chat", [textTurn("Fine.")]);
      const again = serveHere([...common, ...next.flags], next.env);
      await waitUntilServing(bus, prefix, again);
      // Only a live session is stopped: a decision refused for other arguments brings it up.
      expect(
        await control(prefix, { session: "s4", command: "deny", toolCallId: "call_1", arguments: '{"x":1}' }),
      ).toMatchObject({ ok: false, error: { code: "bad_request" } });
      expect(await control(prefix, { session: "s4", command: "stop" })).toEqual({ ok: true });
      await waitFor(() => kinds(events, "ChatFailed").length === 1, 60_000);
      expect(kinds(events, "ChatFailed")[0]).toMatchObject({ cancelled: true });
      expect(
        await control(prefix, { session: "s4", command: "approve", toolCallId: "call_1" }),
      ).toMatchObject({
        ok: false,
      });
      expect(await chat(prefix, "s4", "never mind")).toMatchObject({ ok: true, result: "Fine." });
      expect(toolResults("openai-chat", next.bodies()[0]!)).toEqual([
        { callId: "call_1", output: JSON.stringify({ error: "cancelled" }) },
      ]);
      expect(kinds(events, "ToolCallStarted")).toEqual([]);
      expect((await again.stop()).code).toBe(0);
    },
  );
});
