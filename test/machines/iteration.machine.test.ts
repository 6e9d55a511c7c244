import { describe, expect, it } from "vitest";
import {
  assign,
  createActor,
  fromCallback,
  fromPromise,
  type InspectionEvent,
  type SnapshotFrom,
} from "xstate";
import {
  type ApprovalEvent,
  type ApprovalRequest,
  deniedToolResult,
  type IterationInput,
  type IterationOutput,
  iterationMachine,
  type StreamEvent,
  type ToolCallSettlement,
} from "../../machines/iteration.machine.js";
import type { GenerateResponse, Message, ToolCall } from "../../src/llm/types.js";
import { createUsage } from "../../src/llm/types.js";
import {
  createMachineCoverage,
  type PlannedPath,
  planEdgePaths,
  planPathFromEvents,
  planSimplePaths,
  type Traversal,
} from "../../src/testing/index.js";
import { settle } from "../support/agent-harness.js";

/**
 * Model-based tests of one iteration: paths planned with xstate/graph over the machine
 * (stream resets, completion with and without tool calls, failure, tool children finishing in
 * every order) are replayed on the real machine with a scripted stream actor and tool actors whose
 * promises the replay settles. The test checks every state and every transition was taken.
 */

type Snapshot = SnapshotFrom<typeof iterationMachine>;
type ToolDone = { type: `xstate.done.actor.tool:${string}`; output: ToolCallSettlement };
type ModelEvent = StreamEvent | ToolDone | ApprovalEvent;

const usage = createUsage(100, 20);
const calls: ToolCall[] = [
  { id: "c1", name: "lookup", arguments: '{"q":"a"}' },
  { id: "c2", name: "lookup", arguments: '{"q":"b"}' },
];
const textResponse: GenerateResponse = {
  content: "the answer",
  toolCalls: [],
  reasoningContent: "thinking aloud",
  thinkingBlocks: [{ type: "thinking", thinking: "hmm", signature: "sig==" }],
  usage,
};
const emptyResponse: GenerateResponse = { content: "", toolCalls: [], usage };
const toolResponse: GenerateResponse = { content: "let me look", toolCalls: calls, usage };
/** A batch where two calls need approval ("deploy") and one does not. */
const approvalCalls: ToolCall[] = [
  { id: "c1", name: "lookup", arguments: '{"q":"a"}' },
  { id: "d1", name: "deploy", arguments: '{"env":"staging"}' },
  { id: "d2", name: "deploy", arguments: '{"env":"prod"}' },
];
const approvalResponse: GenerateResponse = { content: "deploying", toolCalls: approvalCalls, usage };

/** The machine as the tests bind it: calls to "deploy" need approval. */
const machine = iterationMachine.provide({
  guards: { needsApproval: ({ context }) => context.toolCalls.some((call) => call.name === "deploy") },
  actions: {
    selectApprovals: assign({
      awaitingApproval: ({ context }) =>
        context.toolCalls.filter((call) => call.name === "deploy").map((call) => call.id),
    }),
  },
});

const input: IterationInput = {
  messages: [
    { role: "system", content: "sys" },
    { role: "user", content: "hi" },
  ],
  options: { model: "m" },
  iteration: 2,
  isFinal: false,
};

function settlement(call: ToolCall): ToolCallSettlement {
  return {
    callId: call.id,
    toolName: call.name,
    ok: true,
    message: { role: "tool", toolCallId: call.id, toolName: call.name, content: `result of ${call.id}` },
    appended: call.id === "c1" ? [{ role: "user", content: "an image c1 fetched" }] : [],
  };
}

/** The error of a call whose failure ends the chat (an asked agent failed under the `fail` policy). */
const fatalError = {
  code: "agent_failed" as const,
  message: "the asked agent helper/bot-s1 failed",
  retryable: false,
  name: "AgentCallError",
};

/** `call` settled with a failure that ends the chat. */
function fatalSettlement(call: ToolCall): ToolCallSettlement {
  return {
    callId: call.id,
    toolName: call.name,
    ok: false,
    message: { role: "tool", toolCallId: call.id, toolName: call.name, content: '{"error":"failed"}' },
    appended: [],
    fatal: fatalError,
  };
}

function eventsFor(snapshot: Snapshot): ModelEvent[] {
  if (snapshot.status !== "active") return [];
  if (snapshot.value === "streaming") {
    const events: ModelEvent[] = [
      { type: "stream.completed", response: textResponse },
      { type: "stream.completed", response: emptyResponse },
      { type: "stream.completed", response: toolResponse },
      { type: "stream.completed", response: approvalResponse },
      {
        type: "stream.failed",
        error: { code: "server_error", retryable: true, name: "ServerError", message: "overloaded" },
      },
    ];
    // One reset is enough to show it advances the attempt; more would make the graph infinite.
    if (snapshot.context.attempt === 1) events.unshift({ type: "stream.reset", reason: "network" });
    return events;
  }
  if (snapshot.value === "awaitingApproval") {
    return snapshot.context.awaitingApproval.flatMap((toolCallId): ApprovalEvent[] => [
      { type: "approval.granted", toolCallId },
      { type: "approval.denied", toolCallId, reason: `no ${toolCallId}` },
    ]);
  }
  if (snapshot.value === "executingTools") {
    return snapshot.context.toolCalls
      .filter((call) => snapshot.context.outcomes[call.id] === undefined)
      .flatMap((call): ToolDone[] => [
        { type: `xstate.done.actor.tool:${call.id}`, output: settlement(call) },
        // One call may also fail the chat, whichever of the batch is still running.
        ...(call.id === "c2"
          ? [{ type: `xstate.done.actor.tool:${call.id}` as const, output: fatalSettlement(call) }]
          : []),
      ]);
  }
  return [];
}

/** Abstract state: the machine's state, attempt, calls asked for and which ones settled. */
function serializeState(snapshot: Snapshot): string {
  const { attempt, toolCalls, outcomes, error, response } = snapshot.context;
  return JSON.stringify([
    snapshot.status,
    snapshot.value,
    attempt,
    response?.content ?? null,
    toolCalls.map((call) => call.id),
    Object.keys(outcomes).sort(),
    snapshot.context.awaitingApproval,
    error?.name ?? null,
  ]);
}

function serializeEvent(event: ModelEvent): string {
  if (event.type === "stream.completed") return `${event.type}:${event.response.content}`;
  if (event.type === "approval.granted" || event.type === "approval.denied") {
    return `${event.type}:${event.toolCallId}`;
  }
  if (event.type.startsWith("xstate.done.actor.") && (event as ToolDone).output.fatal) {
    return `${event.type}:fatal`;
  }
  return event.type;
}

const traversal: Traversal<Snapshot, ModelEvent> = {
  input,
  events: eventsFor,
  serializeState,
  serializeEvent,
};

/** The real machine with a stream actor the replay drives and tool actors it settles. */
function startScripted(inspect: (inspection: InspectionEvent) => void) {
  const stream = {
    sendBack: null as ((event: StreamEvent) => void) | null,
    started: 0,
    stopped: 0,
  };
  const tools = new Map<string, { resolve(output: ToolCallSettlement): void; signal: AbortSignal }>();
  const recorded: Message[] = [];
  const announced: ApprovalRequest[][] = [];
  const decisions: { toolCallId: string; approved: boolean }[] = [];
  const scripted = machine.provide({
    actions: {
      recordMessages: (_, { messages }) => recorded.push(...messages),
      announceApprovals: (_, { requests }) => announced.push(requests),
      noteDecision: (_, { toolCallId, approved }) => decisions.push({ toolCallId, approved }),
    },
    actors: {
      streamModel: fromCallback<StreamEvent, IterationInput>(({ sendBack, input: streamInput }) => {
        expect(streamInput.messages).toEqual(input.messages);
        stream.started += 1;
        stream.sendBack = sendBack;
        return () => {
          stream.stopped += 1;
        };
      }),
      runToolCall: fromPromise<ToolCallSettlement, { call: ToolCall; iteration: number }>(
        ({ input: toolInput, signal }) =>
          new Promise((resolve) => {
            expect(toolInput.iteration).toBe(input.iteration);
            tools.set(toolInput.call.id, { resolve, signal });
          }),
      ),
    },
  });
  const actor = createActor(scripted, { input, inspect });
  actor.start();
  return { actor, stream, tools, recorded, announced, decisions };
}

async function replay(
  path: PlannedPath<Snapshot, ModelEvent>,
  coverage: ReturnType<typeof createMachineCoverage>,
) {
  const { actor, stream, tools, recorded, announced, decisions } = startScripted(coverage.inspect);
  coverage.recordSnapshot(actor.getSnapshot());
  const settledOrder: string[] = [];
  const denied = new Map<string, string | undefined>();
  for (const step of path) {
    const { event } = step;
    if (event.type === "approval.granted" || event.type === "approval.denied") {
      // Nothing runs while a decision is missing.
      expect(tools.size).toBe(0);
      if (event.type === "approval.denied") {
        denied.set(event.toolCallId, event.reason);
        settledOrder.push(event.toolCallId);
      }
      actor.send(event);
    } else if (event.type.startsWith("stream.")) {
      if (!stream.sendBack) throw new Error("the stream actor was not started");
      stream.sendBack(event as StreamEvent);
    } else {
      const callId = event.type.replace("xstate.done.actor.tool:", "");
      const tool = tools.get(callId);
      if (!tool) throw new Error(`tool ${callId} was not started`);
      settledOrder.push(callId);
      tool.resolve((event as ToolDone).output);
      await settle();
    }
    expect(serializeState(actor.getSnapshot())).toBe(serializeState(step.state));
  }

  const snapshot = actor.getSnapshot();
  // One stream per iteration, stopped as soon as the machine leaves streaming.
  expect(stream.started).toBe(1);
  expect(stream.stopped).toBe(snapshot.value === "streaming" ? 0 : 1);
  if (snapshot.status !== "done") return;
  const output = snapshot.output as IterationOutput;
  const response = snapshot.context.response;
  if (snapshot.value === "failed" && snapshot.context.response !== null) {
    // A call's failure ended the chat: the iteration fails with its error at once, its result
    // is recorded, and the calls still running are stopped.
    const fatal = response!.toolCalls.find((call) => call.id === settledOrder.at(-1))!;
    // The output carries what the chat back-fills: the assistant message and every call settled
    // so far, the fatal one included (the calls still running get "cancelled" results there).
    expect(output).toEqual({
      status: "failed",
      usage,
      error: fatalError,
      inFlight: { assistant: snapshot.context.assistant, settled: snapshot.context.outcomes },
    });
    expect(output.status === "failed" && output.inFlight?.settled[fatal.id]).toEqual(fatalSettlement(fatal));
    expect(recorded.at(-1)).toEqual(fatalSettlement(fatal).message);
    for (const [id, tool] of tools) expect(tool.signal.aborted).toBe(!settledOrder.includes(id));
    return;
  }
  if (snapshot.value === "failed") {
    expect(output).toEqual({ status: "failed", usage: createUsage(0, 0), error: snapshot.context.error });
    expect(recorded).toEqual([]);
    return;
  }
  const assistant = recorded[0];
  expect(assistant?.role).toBe("assistant");
  if (snapshot.value === "answered") {
    expect(output).toEqual({ status: "answered", usage, content: response!.content, messages: [assistant] });
    if (response === textResponse) {
      // Thinking blocks (with their signatures) and reasoning travel in the assistant message.
      expect(assistant).toMatchObject({
        content: "the answer",
        reasoningContent: "thinking aloud",
        thinkingBlocks: textResponse.thinkingBlocks,
      });
    }
    expect(recorded).toHaveLength(1);
    return;
  }
  // toolsDone: results in the order the model made the calls, whatever order they settled in; a
  // denied call's result says so (with the reason) and the call never ran.
  expect(snapshot.value).toBe("toolsDone");
  const batch = response!.toolCalls;
  expect(new Set(settledOrder)).toEqual(new Set(batch.map((call) => call.id)));
  for (const id of denied.keys()) expect(tools.has(id)).toBe(false);
  const resultOf = (call: ToolCall) =>
    denied.has(call.id) ? deniedToolResult(call, denied.get(call.id)) : settlement(call);
  const appended = batch.flatMap((call) => resultOf(call).appended);
  expect(output).toEqual({
    status: "toolsDone",
    usage,
    content: null,
    messages: [
      { role: "assistant", content: response!.content, toolCalls: batch },
      ...batch.map((call) => resultOf(call).message),
      ...appended,
    ],
  });
  // onMessageRecorded sees the assistant message, then each result as it settles, then what the
  // tools appended.
  expect(recorded.slice(1, 1 + settledOrder.length).map((message) => message.toolCallId)).toEqual(
    settledOrder,
  );
  expect(recorded.slice(1 + settledOrder.length)).toEqual(appended);
  for (const tool of tools.values()) expect(tool.signal.aborted).toBe(false);
  // The calls needing approval were announced once, with their exact arguments, and decided once.
  const held = batch.filter((call) => call.name === "deploy");
  expect(announced).toEqual(
    held.length === 0
      ? []
      : [held.map((call) => ({ toolCallId: call.id, toolName: call.name, arguments: call.arguments }))],
  );
  expect(decisions.map((decision) => decision.toolCallId).sort()).toEqual(held.map((call) => call.id).sort());
}

describe("iteration machine (model-based)", () => {
  const edgePaths = planEdgePaths(machine, traversal);
  const simplePaths = planSimplePaths(machine, traversal);

  it("plans a non-trivial graph: every edge and every simple path", () => {
    expect(edgePaths.length).toBeGreaterThan(10);
    expect(simplePaths.length).toBeGreaterThan(10);
    // Both completion orders of the two tool calls are planned.
    const orders = simplePaths
      .map((path) =>
        path.filter((step) => step.event.type.startsWith("xstate.done")).map((s) => s.event.type),
      )
      .filter((types) => types.length === 2)
      .map((types) => types.join(","));
    // …and so are both orders of two approved calls (the third call's result still to come).
    expect([...new Set(orders)]).toEqual(
      expect.arrayContaining([
        "xstate.done.actor.tool:d1,xstate.done.actor.tool:d2",
        "xstate.done.actor.tool:d2,xstate.done.actor.tool:d1",
        "xstate.done.actor.tool:c1,xstate.done.actor.tool:c2",
        "xstate.done.actor.tool:c2,xstate.done.actor.tool:c1",
      ]),
    );
  });

  it("replays every path on the real machine and covers every state and transition", async () => {
    const coverage = createMachineCoverage(iterationMachine);
    for (const path of [...edgePaths, ...simplePaths]) await replay(path, coverage);
    const report = coverage.report();
    expect(report.states.missing).toEqual([]);
    expect(report.transitions.missing).toEqual([]);
    expect(report.states.ratio).toBe(1);
    expect(report.transitions.ratio).toBe(1);
    expect(report.transitions.total).toBeGreaterThanOrEqual(8);
  });
});

describe("iteration machine (behaviour)", () => {
  it("a hand-written scenario (reset, two calls finishing in reverse order) ends in toolsDone", async () => {
    const path = planPathFromEvents<Snapshot, ModelEvent>(
      machine,
      [
        { type: "stream.reset", reason: "network" },
        { type: "stream.completed", response: toolResponse },
        { type: "xstate.done.actor.tool:c2", output: settlement(calls[1]!) },
        { type: "xstate.done.actor.tool:c1", output: settlement(calls[0]!) },
      ],
      traversal,
    );
    expect(path.map((step) => step.state.value)).toEqual([
      "streaming",
      "executingTools",
      "executingTools",
      "toolsDone",
    ]);
    expect(path[0]?.state.context.attempt).toBe(2);
    // The replay checks the results come back in call order.
    await replay(path, createMachineCoverage(iterationMachine));
  });

  it("holds the batch in awaitingApproval until each call needing approval is decided", async () => {
    const path = planPathFromEvents<Snapshot, ModelEvent>(
      machine,
      [
        { type: "stream.completed", response: approvalResponse },
        { type: "approval.denied", toolCallId: "d2", reason: "not on a Friday" },
        { type: "approval.granted", toolCallId: "d1" },
        { type: "xstate.done.actor.tool:d1", output: settlement(approvalCalls[1]!) },
        { type: "xstate.done.actor.tool:c1", output: settlement(approvalCalls[0]!) },
      ],
      traversal,
    );
    expect(path.map((step) => step.state.value)).toEqual([
      "awaitingApproval",
      "awaitingApproval",
      "executingTools",
      "executingTools",
      "toolsDone",
    ]);
    await replay(path, createMachineCoverage(iterationMachine));
  });

  it("refuses a decision about an unknown call, a decided call, or other arguments", () => {
    const { actor, stream, tools, decisions } = startScripted(() => {});
    stream.sendBack!({ type: "stream.completed", response: approvalResponse });
    const held = () => actor.getSnapshot().context.awaitingApproval;
    expect(held()).toEqual(["d1", "d2"]);
    actor.send({ type: "approval.granted", toolCallId: "c1" });
    actor.send({ type: "approval.granted", toolCallId: "nope" });
    actor.send({ type: "approval.granted", toolCallId: "d1", arguments: '{"env":"prod"}' });
    expect(held()).toEqual(["d1", "d2"]);
    actor.send({ type: "approval.granted", toolCallId: "d1", arguments: '{"env":"staging"}' });
    actor.send({ type: "approval.denied", toolCallId: "d1", reason: "too late" });
    expect(held()).toEqual(["d2"]);
    expect(decisions).toEqual([{ toolCallId: "d1", approved: true }]);
    expect(actor.getSnapshot().value).toBe("awaitingApproval");
    expect(tools.size).toBe(0);
    actor.stop();
  });

  it("spawns one child per tool call, named tool:<callId>", async () => {
    const { actor, stream } = startScripted(() => {});
    stream.sendBack!({ type: "stream.completed", response: toolResponse });
    expect(Object.keys(actor.getSnapshot().children).sort()).toEqual(["tool:c1", "tool:c2"]);
    actor.stop();
  });

  it("stopping the iteration stops the stream and aborts running tools", async () => {
    const { actor, stream, tools } = startScripted(() => {});
    stream.sendBack!({ type: "stream.completed", response: toolResponse });
    await settle();
    actor.stop();
    expect(stream.stopped).toBe(1);
    expect([...tools.values()].map((tool) => tool.signal.aborted)).toEqual([true, true]);
  });
});
