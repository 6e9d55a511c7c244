import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { BusMessage } from "../../src/bus/bus.js";
import { createBusEventPublisher } from "../../src/bus/event-publisher.js";
import { LocalBus } from "../../src/bus/local-bus.js";
import { EVENT_KINDS } from "../../src/events/event-schemas.js";
import { type ParsedEvent, parseEvent, parseEventJson } from "../../src/events/parse-event.js";
import type { AgentEvent } from "../../src/events/types.js";
import { AuthenticationError } from "../../src/llm/errors.js";
import { defineTool } from "../../src/tools/define-tool.js";
import { createTestAgent, waitUntil } from "../support/agent-harness.js";

/** One zod schema per event kind, and one parser every reader of events uses. */

const ping = defineTool({
  name: "ping",
  description: "Pings.",
  parameters: z.object({}),
  execute: () => "pong",
});
const boom = defineTool({
  name: "boom",
  description: "Always fails.",
  parameters: z.object({}),
  execute: () => {
    throw new Error("it blew up");
  },
});
const deploy = defineTool({
  name: "deploy",
  description: "Deploys.",
  parameters: z.object({ env: z.string() }),
  needsApproval: () => true,
  execute: ({ env }) => `deployed to ${env}`,
});

/** Every event a scripted session emits, as the host's publisher put it on the bus. */
async function publishedPayloads(): Promise<BusMessage[]> {
  const bus = new LocalBus();
  const received: BusMessage[] = [];
  bus.subscribe("agentloop.events.>", (message) => received.push(message));
  const publish = createBusEventPublisher(bus);
  const { agent, events, eventsOf } = await createTestAgent({
    script: [
      // Cut mid-stream: a segment reset, then the retried answer.
      { fault: "disconnect_after", reasoningDeltas: ["hm"], deltas: ["Work", "ing"] },
      {
        reasoningDeltas: ["hm"],
        deltas: ["Work", "ing"],
        toolCalls: [
          { name: "ping" },
          { name: "boom" },
          { id: "call-deploy", name: "deploy", arguments: { env: "prod" } },
        ],
      },
      { deltas: ["All ", "done."], usage: { prompt: 900, completion: 10 } },
      { text: "Summary.", usage: { prompt: 900, completion: 5 } },
      { error: new AuthenticationError("bad key") },
    ],
    tools: [ping, boom, deploy],
    options: { tokenLimit: 1000, onLog: publish },
  });
  const chat = agent.chat("do the work");
  await waitUntil(() => eventsOf("ToolApprovalRequested").length === 1);
  await agent.decideToolCall?.({ toolCallId: "call-deploy", approved: true });
  await chat;
  await expect(agent.chat("again")).rejects.toThrow("bad key");
  expect(publish.failures).toBe(0);
  await waitUntil(() => received.length === events.length);
  return received;
}

function expectInvalid(parsed: ParsedEvent): string {
  if (parsed.status !== "invalid") throw new Error(`expected invalid, got ${parsed.status}`);
  return parsed.reason;
}

const base = {
  agent: "bot",
  session: "s1",
  chatId: "c1",
  seq: 1,
  ts: "2026-01-01T00:00:00.000Z",
  iteration: 1,
};

describe("the event schemas", () => {
  it("accept every event a scripted session publishes, one of each kind at least", async () => {
    const payloads = await publishedPayloads();
    const kinds = new Set<string>();
    for (const payload of payloads) {
      const parsed = parseEventJson(payload.data);
      expect(parsed, payload.data).toMatchObject({ status: "known" });
      if (parsed.status === "known") {
        kinds.add(parsed.event.kind);
        // Returned as it came, not rebuilt.
        expect(parsed.event).toEqual(JSON.parse(payload.data));
      }
    }
    // Every kind but the two a resumed chat publishes (checked in test/journal/resume.test.ts) and
    // the progress of an asked agent (test/tools/agent-tree.test.ts, where each level parses it).
    const resumeKinds = new Set(["ChatResumed", "ToolCallInDoubt", "ToolCallProgress"]);
    expect([...kinds].sort()).toEqual(EVENT_KINDS.filter((kind) => !resumeKinds.has(kind)).sort());
  });

  it("reject a malformed event of a known kind with the field and the reason", () => {
    expect(expectInvalid(parseEvent({ ...base, kind: "ModelTextDelta" }))).toMatch(
      /^ModelTextDelta: delta: .*string/,
    );
    expect(
      expectInvalid(
        parseEvent({ ...base, kind: "ChatCompleted", result: "ok", tokenUsed: 1, usage: { prompt: 1 } }),
      ),
    ).toMatch(/^ChatCompleted: usage\.completion: .*number/);
    expect(
      expectInvalid(parseEvent({ ...base, kind: "ChatFailed", error: { name: "E" }, cancelled: false })),
    ).toMatch(/^ChatFailed: error\.message: /);
    expect(expectInvalid(parseEvent({ ...base, kind: "ContextCompaction", phase: "halfway" }))).toMatch(
      /^ContextCompaction: phase: /,
    );
  });

  it("reject what is not an event: not JSON, not an object, a common field missing or mistyped", () => {
    expect(expectInvalid(parseEventJson("{oops"))).toBe("not JSON");
    expect(expectInvalid(parseEvent("a string"))).toMatch(/object/);
    const { seq: _seq, ...noSeq } = base;
    expect(expectInvalid(parseEvent({ ...noSeq, kind: "ModelTextDelta", delta: "x" }))).toMatch(/^seq: /);
    expect(expectInvalid(parseEvent({ ...base, agent: 7, kind: "ModelTextDelta", delta: "x" }))).toMatch(
      /^agent: /,
    );
    expect(expectInvalid(parseEvent({ ...base, kind: "", delta: "x" }))).toMatch(/^kind: /);
  });

  it("keep an event of a newer kind as it came when its common fields are valid", () => {
    const newer = { ...base, kind: "ModelThoughtSummary", summary: "thinking" };
    expect(parseEvent(newer)).toEqual({ status: "unknown-kind", event: newer });
  });

  it("let fields added by a later version through", () => {
    const event: AgentEvent & { truncated: boolean } = {
      ...base,
      kind: "ModelTextDelta",
      delta: "x",
      truncated: true,
    };
    expect(parseEvent(event)).toEqual({ status: "known", event });
  });
});
