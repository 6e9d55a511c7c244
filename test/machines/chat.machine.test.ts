import { describe, expect, it } from "vitest";
import { createActor, fromPromise, type InspectionEvent, type SnapshotFrom } from "xstate";
import {
  type ChatInput,
  type ChatOutput,
  chatMachine,
  EMPTY_REPLY_PLACEHOLDER,
} from "../../machines/chat.machine.js";
import type {
  CompactionInput,
  CompactionOutput,
  compactionMachine,
} from "../../machines/compaction.machine.js";
import type {
  IterationInFlight,
  IterationInput,
  IterationOutput,
  iterationMachine,
} from "../../machines/iteration.machine.js";
import type { EventBody } from "../../src/events/types.js";
import type { Message, ToolCall, ToolDefinition } from "../../src/llm/types.js";
import { canCallTools, createUsage, emptyUsage } from "../../src/llm/types.js";
import {
  createMachineCoverage,
  type MachineCoverage,
  type PlannedPath,
  planEdgePaths,
  planSimplePaths,
  type Traversal,
} from "../../src/testing/index.js";
import { danglingToolCalls, settle } from "../support/agent-harness.js";

/**
 * Model-based tests of the chat loop: the iteration, compaction and history actors are
 * replaced with promises the replay settles; paths planned with xstate/graph (the user message
 * persisted first, or its write failing or cancelled; iterations answering, calling tools,
 * failing; cancellation mid-tools; compaction on both sides of the threshold and failing; history
 * writes failing) are replayed on the real machine; every state and every transition of the
 * definition must be taken.
 */

type Snapshot = SnapshotFrom<typeof chatMachine>;

/** The invoked children, by the state that invokes them (auto ids: `<index>.<state node id>`). */
const INVOKE_IDS = {
  persistingUserMessage: "0.chat.persistingUserMessage",
  "iterating.toolTurn": "0.chat.iterating.toolTurn",
  "iterating.finalTurn": "0.chat.iterating.finalTurn",
  compacting: "0.chat.compacting",
  recoveringContext: "0.chat.recoveringContext",
  appending: "0.chat.appending",
  failing: "0.chat.failing",
  cancelling: "0.chat.cancelling",
} as const;
type StateKey = keyof typeof INVOKE_IDS;
type InvokeId = (typeof INVOKE_IDS)[StateKey];

type ModelEvent =
  | { type: "cancel"; inFlight?: IterationInFlight | null }
  | { type: `xstate.done.actor.${InvokeId}`; output: unknown }
  | { type: `xstate.error.actor.${InvokeId}`; error: Error };

const TOKEN_LIMIT = 1000;
const tool: ToolDefinition = { name: "lookup", description: "looks up", parameters: { type: "object" } };
const calls: ToolCall[] = [
  { id: "c1", name: "lookup", arguments: "{}" },
  { id: "c2", name: "lookup", arguments: "{}" },
];
const toolCallingAssistant: Message = { role: "assistant", content: "", toolCalls: calls };
const toolMessage = (call: ToolCall): Message => ({
  role: "tool",
  toolCallId: call.id,
  toolName: call.name,
  content: `result of ${call.id}`,
});

/** Below the 0.7 ratio (699 of 1000) and at it (700 of 1000). */
const smallUsage = createUsage(600, 99);
const largeUsage = createUsage(650, 50);
const answered = (usage = smallUsage, content = "the answer"): IterationOutput => ({
  status: "answered",
  usage,
  content,
  messages: [{ role: "assistant", content }],
});
const toolsDone: IterationOutput = {
  status: "toolsDone",
  usage: createUsage(300, 10),
  content: null,
  messages: [toolCallingAssistant, ...calls.map(toolMessage)],
};
const settledOutcome = (call: ToolCall) => ({
  callId: call.id,
  toolName: call.name,
  ok: true,
  message: toolMessage(call),
  appended: [],
});
/** A cancel sent while the turn's calls run: the first has settled, the second has not. */
const cancelMidTools: ModelEvent = {
  type: "cancel",
  inFlight: { assistant: toolCallingAssistant, settled: { c1: settledOutcome(calls[0]!) } },
};
/** A call's failure ended the turn (an asked agent failed under the `fail` policy). */
const fatalToolFailure: IterationOutput = {
  status: "failed",
  usage: createUsage(300, 10),
  error: { code: "agent_failed", retryable: false, name: "AgentFailedError", message: "asked agent failed" },
  inFlight: { assistant: toolCallingAssistant, settled: { c1: settledOutcome(calls[0]!) } },
};
const iterationFailed: IterationOutput = {
  status: "failed",
  usage: emptyUsage(),
  error: { code: "authentication", retryable: false, name: "AuthenticationError", message: "bad key" },
};
/** The provider refused the context as too long. */
const contextOverflow: IterationOutput = {
  status: "failed",
  usage: emptyUsage(),
  error: {
    code: "context_length_exceeded",
    retryable: false,
    name: "ContextLengthExceededError",
    message: "prompt is too long",
  },
};
const summary: Message = { role: "user", content: "[Summary of the conversation so far]\n\nall of it" };
const compacted: CompactionOutput = {
  ok: true,
  messages: [summary],
  tokenUsed: 12,
  usage: createUsage(700, 12),
};
const compactionFailed: CompactionOutput = {
  ok: false,
  usage: createUsage(700, 0),
  error: { code: "empty_summary", retryable: false, name: "EmptySummaryError", message: "empty" },
};

const history: Message[] = [
  { role: "user", content: "earlier" },
  { role: "assistant", content: "earlier answer" },
];
const input: ChatInput = {
  userText: "what now?",
  injections: ["<TODO_LIST_REMINDER>plan</TODO_LIST_REMINDER>"],
  systemPrompt: "sys",
  history,
  options: { model: "m", reasoningEffort: "high" },
  tools: [tool],
  maxIterations: 2,
  tokenLimit: TOKEN_LIMIT,
  contextCompactRatio: 0.7,
  tokenUsed: 5,
};

const done = (id: InvokeId, output: unknown): ModelEvent => ({ type: `xstate.done.actor.${id}`, output });
const failure = (id: InvokeId): ModelEvent => ({
  type: `xstate.error.actor.${id}`,
  error: new Error(`${id} broke`),
});

function stateKey(snapshot: Snapshot): StateKey | string {
  const { value } = snapshot;
  return typeof value === "string" ? value : `iterating.${(value as { iterating: string }).iterating}`;
}

function eventsFor(snapshot: Snapshot): ModelEvent[] {
  if (snapshot.status !== "active") return [];
  const key = stateKey(snapshot);
  if (key === "iterating.toolTurn" || key === "iterating.finalTurn") {
    const id = INVOKE_IDS[key];
    const events: ModelEvent[] = [
      done(id, answered()),
      done(id, answered(largeUsage)),
      done(id, iterationFailed),
      done(id, contextOverflow),
      failure(id),
      { type: "cancel" },
    ];
    if (key === "iterating.toolTurn") {
      // A cancel carries what the running iteration has in flight; a call's failure, its output.
      events.push(done(id, toolsDone), done(id, fatalToolFailure), cancelMidTools);
    }
    return events;
  }
  if (key === "compacting" || key === "recoveringContext") {
    return [
      done(INVOKE_IDS[key], compacted),
      done(INVOKE_IDS[key], compactionFailed),
      failure(INVOKE_IDS[key]),
      { type: "cancel" },
    ];
  }
  if (key === "appending" || key === "failing" || key === "cancelling") {
    return [done(INVOKE_IDS[key], undefined), failure(INVOKE_IDS[key])];
  }
  if (key === "persistingUserMessage") {
    const events: ModelEvent[] = [done(INVOKE_IDS[key], undefined), failure(INVOKE_IDS[key])];
    // A second cancel changes nothing: one is enough for the graph.
    if (!snapshot.context.isCancelRequested) events.push({ type: "cancel" });
    return events;
  }
  return [];
}

/** Abstract state: where the chat is, which iteration, what is in flight, how it ends. */
function serializeState(snapshot: Snapshot): string {
  const { iteration, inFlight, compacted: isCompacted, error, status, tokenUsed, result } = snapshot.context;
  return JSON.stringify([
    snapshot.status,
    stateKey(snapshot),
    snapshot.context.isCancelRequested,
    iteration,
    inFlight.assistant === null ? null : Object.keys(inFlight.settled).sort(),
    isCompacted,
    error?.name ?? null,
    status,
    tokenUsed,
    result,
  ]);
}

function serializeEvent(event: ModelEvent): string {
  if ("output" in event) return `${event.type}:${JSON.stringify(event.output)}`;
  if (event.type === "cancel" && event.inFlight) {
    return `${event.type}:${Object.keys(event.inFlight.settled).sort().join(",")}`;
  }
  return event.type;
}

const traversal: Traversal<Snapshot, ModelEvent> = {
  input,
  events: eventsFor,
  serializeState,
  serializeEvent,
};

interface Pending {
  id: InvokeId;
  input: unknown;
  signal: AbortSignal;
  resolve(output: unknown): void;
  reject(error: unknown): void;
}

/** The real chat machine with every invoked actor scripted. */
function startScripted(chatInput: ChatInput, inspect: (inspection: InspectionEvent) => void) {
  const pending = new Map<InvokeId, Pending>();
  const started: Pending[] = [];
  const reports: Array<{ iteration: number; body: EventBody }> = [];
  const recorded: Message[] = [];
  const scripted = <Output, Input>(ids: readonly InvokeId[]) =>
    fromPromise<Output, Input>(({ input: actorInput, signal, self }) => {
      const id = ids.find((candidate) => candidate === self.id);
      if (!id) throw new Error(`unexpected invoke id ${self.id}`);
      return new Promise<Output>((resolve, reject) => {
        const task: Pending = { id, input: actorInput, signal, resolve: (o) => resolve(o as Output), reject };
        pending.set(id, task);
        started.push(task);
      });
    });
  const machine = chatMachine.provide({
    actions: {
      report: (_, params) => reports.push(params),
      recordMessages: (_, { messages }) => recorded.push(...messages),
    },
    actors: {
      // The real iteration is a machine; here a promise stands in for it (its output is all the
      // chat machine reads), so the declared logic type is cast away.
      runIteration: scripted<IterationOutput, IterationInput>([
        INVOKE_IDS["iterating.toolTurn"],
        INVOKE_IDS["iterating.finalTurn"],
      ]) as unknown as typeof iterationMachine,
      compactContext: scripted<CompactionOutput, CompactionInput>([
        INVOKE_IDS.compacting,
        INVOKE_IDS.recoveringContext,
      ]) as unknown as typeof compactionMachine,
      appendHistory: scripted<void, { messages: Message[] }>([
        INVOKE_IDS.persistingUserMessage,
        INVOKE_IDS.appending,
        INVOKE_IDS.failing,
        INVOKE_IDS.cancelling,
      ]),
    },
  });
  const actor = createActor(machine, { input: chatInput, inspect });
  actor.start();
  return { actor, pending, started, reports, recorded };
}

const userMessage: Message = {
  role: "user",
  content: "<TODO_LIST_REMINDER>plan</TODO_LIST_REMINDER>\n\nwhat now?",
};

async function replay(
  path: PlannedPath<Snapshot, ModelEvent>,
  coverage: MachineCoverage,
  chatInput: ChatInput = input,
) {
  const { actor, pending, started, reports, recorded } = startScripted(chatInput, coverage.inspect);
  coverage.recordSnapshot(actor.getSnapshot());
  for (const step of path) {
    const { event } = step;
    const running = [...pending.values()];
    if (event.type === "cancel") {
      actor.send(event as Extract<ModelEvent, { type: "cancel" }>);
      const userWrite = pending.get(INVOKE_IDS.persistingUserMessage);
      // The user message's write is never cut short: a cancel waits for it to settle.
      if (userWrite) expect(userWrite.signal.aborted).toBe(false);
      else if (event.type === "cancel") {
        // Leaving the state stops the invoked child: its work is aborted.
        for (const task of running) expect(task.signal.aborted).toBe(true);
        for (const task of running) pending.delete(task.id);
      }
    } else {
      const id = event.type.replace(/^xstate\.(done|error)\.actor\./, "") as InvokeId;
      const task = pending.get(id);
      if (!task) throw new Error(`${id} is not running (running: ${[...pending.keys()].join(", ")})`);
      pending.delete(id);
      if ("output" in event) task.resolve(event.output);
      else task.reject((event as { error: Error }).error);
      await settle();
    }
    expect(serializeState(actor.getSnapshot())).toBe(serializeState(step.state));
  }
  checkInvariants(actor.getSnapshot(), started, reports, recorded);
}

/** What must hold on every path, whatever its events. */
function checkInvariants(
  snapshot: Snapshot,
  started: Pending[],
  reports: Array<{ iteration: number; body: EventBody }>,
  recorded: Message[],
) {
  if (snapshot.context.error?.code === "budget_exceeded") {
    // Refused before anything: no message recorded or written, no model request, one ChatFailed.
    expect(recorded).toEqual([]);
    expect(started).toEqual([]);
    expect(reports.map((report) => report.body.kind)).toEqual(["ChatFailed"]);
    expect(snapshot.status).toBe("done");
    return;
  }
  // The user message: injections first, then the text; recorded once, before anything else.
  // (The iteration stand-in records nothing; what the chat machine adds itself is the cancelled
  // results it back-fills for calls that never settled.)
  expect(recorded[0]).toEqual(userMessage);
  for (const message of recorded.slice(1)) {
    expect(message).toMatchObject({ role: "tool", content: JSON.stringify({ error: "cancelled" }) });
  }
  // After a context-length recovery the history before the chat is the summary, and the same
  // iteration runs again.
  const recoveryAt = started.findIndex((task) => task.id === INVOKE_IDS.recoveringContext);
  const recovery = started[recoveryAt];
  if (recovery) {
    // The summary replaces the history before the chat; the persisted user message stays after it.
    expect(recovery.input).toMatchObject({ messages: history, keptTail: [userMessage] });
  }
  const iterations = started
    .map((task, position) => ({ task, isAfterRecovery: recoveryAt !== -1 && position > recoveryAt }))
    .filter(({ task }) => task.id.includes("iterating"));
  iterations.forEach(({ task, isAfterRecovery }, index) => {
    const iterationInput = task.input as IterationInput;
    const expectedIteration = isAfterRecovery ? index : index + 1;
    expect(iterationInput.iteration).toBe(expectedIteration);
    expect(iterationInput.messages[0]).toEqual({ role: "system", content: "sys" });
    const before = isAfterRecovery ? [summary] : history;
    expect(iterationInput.messages.slice(1, before.length + 2)).toEqual([...before, userMessage]);
    // The last iteration is the final turn: no callable tool, reasoning kept.
    const isFinal = expectedIteration === input.maxIterations;
    expect(iterationInput.isFinal).toBe(isFinal);
    expect(task.id).toBe(isFinal ? INVOKE_IDS["iterating.finalTurn"] : INVOKE_IDS["iterating.toolTurn"]);
    expect(canCallTools(iterationInput.options)).toBe(!isFinal);
    expect(iterationInput.options.reasoningEffort).toBe("high");
    if (isFinal) expect(iterationInput.options).toMatchObject({ tools: [tool], toolChoice: "none" });
  });
  const writes = started.filter(
    (task) =>
      task.id === INVOKE_IDS.persistingUserMessage ||
      task.id === INVOKE_IDS.appending ||
      task.id === INVOKE_IDS.failing ||
      task.id === INVOKE_IDS.cancelling,
  );
  // The user message is written first, before any model request, and on its own.
  expect(started[0]?.id).toBe(INVOKE_IDS.persistingUserMessage);
  expect((started[0]?.input as { messages: Message[] }).messages).toEqual([userMessage]);
  const written = writes.flatMap((write) => (write.input as { messages: Message[] }).messages);
  // Only this chat's messages are appended, each once, and never a dangling tool call.
  expect(written.filter((message) => message.role === "user")).toEqual([userMessage]);
  for (const write of writes) {
    expect(danglingToolCalls((write.input as { messages: Message[] }).messages)).toEqual([]);
  }
  if (snapshot.status !== "done") return;

  const output = snapshot.output as ChatOutput;
  expect(danglingToolCalls(output.messages)).toEqual([]);
  expect(output.status).toBe(snapshot.value);
  const last = reports.at(-1);
  expect(last?.iteration).toBe(0);
  if (output.status === "done") {
    expect(last?.body).toEqual({
      kind: "ChatCompleted",
      result: output.result,
      usage: output.usage,
      tokenUsed: output.tokenUsed,
      tokenLimit: TOKEN_LIMIT,
    });
    expect(output.result).not.toBe("");
    if (output.result.trim() === "") throw new Error("an empty result escaped");
    if (output.compacted) {
      expect(output.messages).toEqual([summary]);
      expect(output.tokenUsed).toBe(12);
    } else {
      const before = recoveryAt === -1 ? history : [summary];
      expect(output.messages.slice(0, before.length + 1)).toEqual([...before, userMessage]);
      // What the history received over the chat is exactly the chat's messages, in order.
      expect(written).toEqual(output.messages.slice(before.length));
    }
  } else {
    expect(last?.body).toEqual({
      kind: "ChatFailed",
      error: output.error,
      cancelled: output.status === "cancelled",
    });
    if (output.status === "cancelled") expect(output.error?.name).toBe("ChatCancelledError");
  }
}

describe("chat machine (model-based)", () => {
  const edgePaths = planEdgePaths(chatMachine, traversal);
  // Simple paths to the final states: the others are prefixes of these.
  const simplePaths = planSimplePaths(chatMachine, traversal).filter(
    (path) => path.at(-1)?.state.status === "done",
  );

  it("plans every edge and every simple path of a finite graph", () => {
    expect(edgePaths.length).toBeGreaterThan(40);
    expect(simplePaths.length).toBeGreaterThan(40);
  });

  it("replays every path on the real machine and covers every state and transition", async () => {
    const coverage = createMachineCoverage(chatMachine);
    for (const path of [...edgePaths, ...simplePaths]) await replay(path, coverage);
    // A spent budget: the chat is refused as it starts, with no event to send (an empty path).
    const overBudget: ChatInput = { ...input, budget: { isExceeded: true, reason: "spent" } };
    expect(planEdgePaths(chatMachine, { ...traversal, input: overBudget })).toEqual([]);
    await replay([], coverage, overBudget);
    const report = coverage.report();
    expect(report.states.missing).toEqual([]);
    expect(report.transitions.missing).toEqual([]);
    expect([report.states.ratio, report.transitions.ratio]).toEqual([1, 1]);
    expect(report.transitions.total).toBeGreaterThanOrEqual(25);
  });
});

describe("chat machine (behaviour)", () => {
  it("names its invoked children <index>.<state id>, as the done events say", () => {
    for (const [state, id] of Object.entries(INVOKE_IDS)) {
      expect(chatMachine.getStateNodeById(`chat.${state}`).invoke.map((definition) => definition.id)).toEqual(
        [id],
      );
    }
  });

  it("measures tokenUsed from the last request only and sums usage over the requests", async () => {
    const { actor, pending } = startScripted(input, () => {});
    pending.get(INVOKE_IDS.persistingUserMessage)!.resolve(undefined);
    await settle();
    pending.get(INVOKE_IDS["iterating.toolTurn"])!.resolve(toolsDone);
    await settle();
    pending.get(INVOKE_IDS["iterating.finalTurn"])!.resolve(answered(createUsage(400, 20)));
    await settle();
    pending.get(INVOKE_IDS.appending)!.resolve(undefined);
    await settle();
    const output = actor.getSnapshot().output as ChatOutput;
    expect(output.tokenUsed).toBe(420);
    expect(output.usage).toEqual(createUsage(700, 30));
  });

  it("turns an empty answer into the placeholder", async () => {
    const { actor, pending } = startScripted({ ...input, maxIterations: 1 }, () => {});
    pending.get(INVOKE_IDS.persistingUserMessage)!.resolve(undefined);
    await settle();
    pending
      .get(INVOKE_IDS["iterating.finalTurn"])!
      .resolve({ ...answered(smallUsage, ""), messages: [{ role: "assistant", content: "" }] });
    await settle();
    const write = pending.get(INVOKE_IDS.appending)!;
    // The empty assistant turn is left out of what is persisted (providers reject empty turns),
    // and the user message was written before the loop: nothing is left to append.
    expect((write.input as { messages: Message[] }).messages).toEqual([]);
    write.resolve(undefined);
    await settle();
    expect((actor.getSnapshot().output as ChatOutput).result).toBe(EMPTY_REPLY_PLACEHOLDER);
  });
});
