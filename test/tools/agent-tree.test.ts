import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { BusMessage } from "../../src/bus/bus.js";
import { NatsBus } from "../../src/bus/nats-bus.js";
import { chatSubject, controlSubject } from "../../src/bus/subjects.js";
import type { AgentEvent } from "../../src/events/types.js";
import { type RunningHost, startHost } from "../../src/host/start-host.js";
import type { GenerateRequest, GenerateResponse } from "../../src/llm/types.js";
import { textOf } from "../../src/llm/types.js";
import { ScriptedBackend, type ScriptedRequest, type ScriptedStep } from "../../src/testing/index.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { workerNatsServer } from "../support/nats-server.js";
import { untilShardsBalanced } from "../support/preferred-session.js";

/**
 * An agent tree over NATS with two in-process hosts: `lead` on one host asks `mid` on the other,
 * which asks `leaf`. The root's subscriber sees the whole tree move (progress), a `stop` on the
 * root stops every level, an approval two levels down is decided through the root, and every event
 * of a child names its parent and the root.
 */

const PREFIX = "agtree";

/** The last user message's text. */
function lastUser(request: ScriptedRequest): string {
  const user = request.messages.filter((message) => message.role === "user").at(-1);
  return user === undefined ? "" : textOf(user.content);
}

/** Asks `next` whatever it is told (prefixed), then answers with the reply it got. */
function asking(next: string) {
  return (request: ScriptedRequest): ScriptedStep => {
    const last = request.messages.at(-1);
    if (last?.role === "tool") return { text: `${next} said: ${textOf(last.content)}` };
    return { toolCalls: [{ name: "ask_agent", arguments: { agent: next, message: lastUser(request) } }] };
  };
}

/** The leaf: `slow` streams until cancelled, `guarded` calls a tool needing approval, else it answers. */
function leafModel(request: ScriptedRequest): ScriptedStep {
  const last = request.messages.at(-1);
  if (last?.role === "tool") return { deltas: ["vault ", "says ", textOf(last.content)] };
  const text = lastUser(request);
  if (text.includes("slow")) return { deltas: ["th", "in", "king"], delayMs: 60_000 };
  if (text.includes("guarded")) return { toolCalls: [{ name: "open_vault", arguments: { door: 7 } }] };
  return { deltas: ["leaf ", "answers ", "you"] };
}

/** A scripted backend that also records the signal of each streamed request (to see them aborted). */
class RecordingBackend extends ScriptedBackend {
  readonly signals: AbortSignal[] = [];
  override generateStream(
    request: GenerateRequest,
    sink: Parameters<ScriptedBackend["generateStream"]>[1],
  ): Promise<GenerateResponse> {
    if (request.signal !== undefined) this.signals.push(request.signal);
    return super.generateStream(request, sink);
  }
}

const openVault = defineTool({
  name: "open_vault",
  description: "Opens a vault door.",
  parameters: z.object({ door: z.number() }),
  needsApproval: true,
  execute: ({ door }) => `door ${door} open`,
});

let leadBus: NatsBus;
let treeBus: NatsBus;
const hosts: RunningHost[] = [];
const models = {
  lead: new RecordingBackend(asking("mid")),
  mid: new RecordingBackend(asking("leaf")),
  leaf: new RecordingBackend(leafModel),
};
/** Every event under the prefix, as a subscriber of the bus sees it. */
const seen: { subject: string; event: AgentEvent }[] = [];

beforeAll(async () => {
  const { url } = await workerNatsServer();
  leadBus = await NatsBus.connect({ url, name: "lead host" });
  treeBus = await NatsBus.connect({ url, name: "tree host" });
  hosts.push(
    await startHost({
      bus: leadBus,
      prefix: PREFIX,
      hostId: "h-lead",
      graceMs: 0,
      agents: [{ name: "lead", tools: ["ask_agent"], backend: models.lead }],
    }),
    await startHost({
      bus: treeBus,
      prefix: PREFIX,
      hostId: "h-tree",
      graceMs: 0,
      agents: [
        { name: "mid", tools: ["ask_agent"], backend: models.mid },
        { name: "leaf", tools: [openVault], backend: models.leaf },
      ],
    }),
  );
  // Each host serves agents the other does not: each holds every shard of its own agents.
  await untilShardsBalanced(leadBus, PREFIX, ["h-lead"]);
  await untilShardsBalanced(leadBus, PREFIX, ["h-tree"]);
  leadBus.subscribe(`${PREFIX}.events.>`, (message: BusMessage) => {
    seen.push({ subject: message.subject, event: JSON.parse(message.data) as AgentEvent });
  });
  await leadBus.flush();
});

afterAll(async () => {
  for (const host of hosts.reverse()) await host.close();
  await leadBus?.close();
  await treeBus?.close();
});

async function waitFor(condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error("timed out waiting for a condition");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

function ask(
  session: string,
  text: string,
): Promise<{ ok: boolean; result?: string; error?: { code: string } }> {
  return leadBus
    .request(chatSubject(PREFIX, "lead"), JSON.stringify({ session, text }), { timeoutMs: 60_000 })
    .then((reply) => JSON.parse(reply.data));
}

function isSessionIdle(event: AgentEvent): boolean {
  return event.kind === "StateChanged" && event.machine === "session" && event.state === "idle";
}

function eventsOf(agent: string, session: string): AgentEvent[] {
  return seen
    .filter(({ event }) => event.agent === agent && event.session === session)
    .map(({ event }) => event);
}

describe("an agent tree over two hosts", () => {
  it("streams the leaf's text and tool steps up to the root's subscriber, and names parent and root on every child event", async () => {
    const reply = await ask("t1", "tell me");
    expect(reply).toMatchObject({ ok: true, result: "mid said: leaf said: leaf answers you" });
    const root = eventsOf("lead", "t1");
    const rootStarted = root.find((event) => event.kind === "ChatStarted")!;
    const rootCall = root.find((event) => event.kind === "ToolCallStarted")!;
    expect(rootCall).toMatchObject({ toolName: "ask_agent" });
    expect(rootStarted.parent).toBeUndefined();

    const mid = eventsOf("mid", "lead-t1");
    const midCall = mid.find((event) => event.kind === "ToolCallStarted")!;
    const rootRef = { agent: "lead", session: "t1", chatId: rootStarted.chatId };
    // Every event of a child chat names the asking call and the root; the chats name each other.
    for (const event of mid.filter((each) => each.chatId === midCall.chatId)) {
      expect(event.parent).toEqual({
        ...rootRef,
        toolCallId: (rootCall as { toolCallId: string }).toolCallId,
      });
      expect(event.root).toEqual(rootRef);
    }
    const leaf = eventsOf("leaf", "mid-lead-t1");
    expect(leaf.length).toBeGreaterThan(0);
    for (const event of leaf.filter((each) => each.kind !== "StateChanged")) {
      expect(event.parent).toMatchObject({
        agent: "mid",
        session: "lead-t1",
        toolCallId: (midCall as { toolCallId: string }).toolCallId,
      });
      expect(event.root).toEqual(rootRef);
    }
    // The root's own session shows the tree move: the mid chat starting, its tool step, the leaf's text.
    const progress = root.filter((event) => event.kind === "ToolCallProgress");
    expect(progress.map((event) => [event.source.agent, event.step])).toEqual(
      expect.arrayContaining([
        ["mid", "chat_started"],
        ["mid", "tool_started"],
        ["leaf", "chat_started"],
        ["leaf", "text"],
        ["leaf", "chat_completed"],
        ["mid", "chat_completed"],
      ]),
    );
    const leafText = progress
      .filter((event) => event.source.agent === "leaf" && event.step === "text")
      .map((event) => event.text)
      .join("");
    expect(leafText).toBe("leaf answers you");
    for (const event of progress)
      expect(event.toolCallId).toBe((rootCall as { toolCallId: string }).toolCallId);
    // The leaf's steps name who asked it (mid's ask_agent call), so a view nests them exactly; the
    // steps of the chat the root asked itself need no such name.
    const midChat = { agent: "mid", session: "lead-t1", chatId: midCall.chatId };
    for (const event of progress) {
      if (event.source.agent === "leaf") {
        expect(event.asker).toEqual({
          ...midChat,
          toolCallId: (midCall as { toolCallId: string }).toolCallId,
        });
      } else expect(event.asker).toBeUndefined();
    }
  });

  it("a stop on the root cancels all three levels: each chat fails cancelled, the leaf's model request is aborted", async () => {
    const before = models.leaf.signals.length;
    const reply = ask("t2", "think slow");
    await waitFor(() => models.leaf.signals.length > before);
    const leafSignal = models.leaf.signals.at(-1)!;
    expect(leafSignal.aborted).toBe(false);
    const stopped = await leadBus.request(
      controlSubject(PREFIX, "lead"),
      JSON.stringify({ session: "t2", command: "stop" }),
    );
    expect(JSON.parse(stopped.data)).toEqual({ ok: true });
    expect(await reply).toMatchObject({ ok: false, error: { code: "cancelled" } });
    const failedCancelled = (agent: string, session: string) =>
      eventsOf(agent, session).some((event) => event.kind === "ChatFailed" && event.cancelled);
    await waitFor(
      () =>
        failedCancelled("lead", "t2") &&
        failedCancelled("mid", "lead-t2") &&
        failedCancelled("leaf", "mid-lead-t2"),
    );
    expect(leafSignal.aborted).toBe(true);
    // Each session goes idle again after its chat's ChatFailed. (A session new to this test reports
    // idle once before its chat, as it opens: waiting for any idle would pass on that one too early.)
    for (const [agent, session] of [
      ["lead", "t2"],
      ["mid", "lead-t2"],
      ["leaf", "mid-lead-t2"],
    ] as const) {
      const idleAfterFailed = () => {
        const events = eventsOf(agent, session);
        const failedAt = events.findIndex((event) => event.kind === "ChatFailed");
        return failedAt >= 0 && events.findLastIndex((event) => isSessionIdle(event)) > failedAt;
      };
      await waitFor(idleAfterFailed);
      expect(idleAfterFailed()).toBe(true);
    }
    // Each asking call is closed: its ToolCallFailed (cancelled) is out.
    for (const [agent, session] of [
      ["lead", "t2"],
      ["mid", "lead-t2"],
    ] as const) {
      expect(eventsOf(agent, session).find((event) => event.kind === "ToolCallFailed")).toMatchObject({
        toolName: "ask_agent",
        error: { code: "tool_cancelled" },
      });
    }
  });

  it("an approval two levels down is asked on the root's session and decided through the root's control subject", async () => {
    const reply = ask("t3", "guarded please");
    await waitFor(() => eventsOf("lead", "t3").some((event) => event.kind === "ToolApprovalRequested"));
    const bubbled = eventsOf("lead", "t3").find((event) => event.kind === "ToolApprovalRequested")!;
    expect(bubbled).toMatchObject({
      toolName: "open_vault",
      arguments: '{"door":7}',
      heldBy: { agent: "leaf", session: "mid-lead-t3" },
    });
    const { toolCallId } = bubbled as { toolCallId: string };
    const decided = await leadBus.request(
      controlSubject(PREFIX, "lead"),
      JSON.stringify({ session: "t3", command: "approve", toolCallId }),
    );
    expect(JSON.parse(decided.data)).toEqual({ ok: true });
    expect(await reply).toMatchObject({ ok: true, result: "mid said: leaf said: vault says door 7 open" });
    // One-time: the same decision again is refused where the call was held.
    const again = await leadBus.request(
      controlSubject(PREFIX, "lead"),
      JSON.stringify({ session: "t3", command: "approve", toolCallId }),
    );
    expect(JSON.parse(again.data)).toMatchObject({ ok: false });
  });

  it("refuses a question that would come back to a session already waiting on its chain with cycle", async () => {
    const lineage = {
      depth: 2,
      chain: [
        { agent: "lead", session: "t4" },
        { agent: "mid", session: "lead-t4" },
      ],
      parent: { agent: "mid", session: "lead-t4", chatId: "c2", toolCallId: "call_2" },
      root: { agent: "lead", session: "t4", chatId: "c1" },
    };
    const reply = await leadBus.request(
      chatSubject(PREFIX, "mid"),
      JSON.stringify({ session: "lead-t4", text: "hi" }),
      {
        headers: { "Agentloop-Lineage": JSON.stringify(lineage) },
      },
    );
    expect(JSON.parse(reply.data)).toMatchObject({
      ok: false,
      error: { code: "cycle", message: expect.stringContaining("lead/t4 → mid/lead-t4") },
    });
    const malformed = await leadBus.request(
      chatSubject(PREFIX, "mid"),
      JSON.stringify({ session: "x", text: "hi" }),
      {
        headers: { "Agentloop-Lineage": "{not json" },
      },
    );
    expect(JSON.parse(malformed.data)).toMatchObject({ ok: false, error: { code: "bad_request" } });
  });

  it("a parent's deadline bounds its children: both are cancelled when it passes", async () => {
    const lineage = {
      depth: 1,
      chain: [{ agent: "lead", session: "t5" }],
      parent: { agent: "lead", session: "t5", chatId: "c5", toolCallId: "call_5" },
      root: { agent: "lead", session: "t5", chatId: "c5" },
      deadline: Date.now() + 1_500,
    };
    const reply = await leadBus.request(
      chatSubject(PREFIX, "mid"),
      JSON.stringify({ session: "lead-t5", text: "think slow" }),
      { headers: { "Agentloop-Lineage": JSON.stringify(lineage) }, timeoutMs: 30_000 },
    );
    expect(JSON.parse(reply.data)).toMatchObject({ ok: false, error: { code: "cancelled" } });
    await waitFor(() =>
      eventsOf("leaf", "mid-lead-t5").some((event) => event.kind === "ChatFailed" && event.cancelled),
    );
    // The leaf was asked with the same deadline, handed down.
    const leafStarted = eventsOf("leaf", "mid-lead-t5").find((event) => event.kind === "ChatStarted");
    expect(leafStarted?.root).toEqual(lineage.root);
  });
});
