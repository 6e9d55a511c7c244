import { describe, expect, it } from "vitest";
import { createActor, fromPromise, type InspectionEvent, type SnapshotFrom } from "xstate";
import {
  type CompactionInput,
  type CompactionOutput,
  compactionInstruction,
  compactionMachine,
  summaryMessage,
} from "../../machines/compaction.machine.js";
import type { EventBody } from "../../src/events/types.js";
import type { GenerateResponse, LlmOptions, Message } from "../../src/llm/types.js";
import { canCallTools, createUsage } from "../../src/llm/types.js";
import {
  createMachineCoverage,
  type MachineCoverage,
  type PlannedPath,
  planEdgePaths,
  planSimplePaths,
  type Traversal,
} from "../../src/testing/index.js";
import { settle } from "../support/agent-harness.js";

/**
 * Model-based tests of compaction: every path through the machine (a summary, an empty
 * or blank summary, a failed request, a failed history write) replayed on the real machine with
 * scripted request and history actors; every state and transition covered.
 */

type Snapshot = SnapshotFrom<typeof compactionMachine>;
type InvokeId = "0.compaction.requesting" | "0.compaction.replacingHistory";
type ModelEvent =
  | { type: "xstate.done.actor.0.compaction.requesting"; output: GenerateResponse }
  | { type: "xstate.error.actor.0.compaction.requesting"; error: Error }
  | { type: "xstate.done.actor.0.compaction.replacingHistory"; output: undefined }
  | { type: "xstate.error.actor.0.compaction.replacingHistory"; error: Error };

const summaryUsage = createUsage(900, 42);
const summary: GenerateResponse = {
  content: "  We planned a trip to Oslo.  ",
  toolCalls: [],
  usage: summaryUsage,
};
const emptySummary: GenerateResponse = { content: "", toolCalls: [], usage: createUsage(900, 0) };
const blankSummary: GenerateResponse = { content: " \n ", toolCalls: [], usage: createUsage(900, 1) };

const tool = { name: "lookup", description: "looks things up", parameters: { type: "object" } };
const conversation: Message[] = [
  { role: "user", content: "plan a trip" },
  { role: "assistant", content: "", toolCalls: [{ id: "c1", name: "lookup", arguments: "{}" }] },
  { role: "tool", toolCallId: "c1", toolName: "lookup", content: "Oslo" },
  { role: "assistant", content: "Oslo it is." },
];
const input: CompactionInput = {
  messages: conversation,
  systemPrompt: "sys",
  options: { model: "m", tools: [tool], reasoningEffort: "high" },
  topic: "travel budget",
};

function eventsFor(snapshot: Snapshot): ModelEvent[] {
  if (snapshot.status !== "active") return [];
  if (snapshot.value === "requesting") {
    return [
      { type: "xstate.done.actor.0.compaction.requesting", output: summary },
      { type: "xstate.done.actor.0.compaction.requesting", output: emptySummary },
      { type: "xstate.done.actor.0.compaction.requesting", output: blankSummary },
      { type: "xstate.error.actor.0.compaction.requesting", error: new Error("overloaded") },
    ];
  }
  if (snapshot.value === "replacingHistory") {
    return [
      { type: "xstate.done.actor.0.compaction.replacingHistory", output: undefined },
      { type: "xstate.error.actor.0.compaction.replacingHistory", error: new Error("disk full") },
    ];
  }
  return [];
}

function serializeState(snapshot: Snapshot): string {
  const { summary: message, error, tokenUsed } = snapshot.context;
  return JSON.stringify([
    snapshot.status,
    snapshot.value,
    message?.content ?? null,
    tokenUsed,
    error?.name ?? null,
  ]);
}

function serializeEvent(event: ModelEvent): string {
  return "output" in event && event.output
    ? `${event.type}:${JSON.stringify(event.output.content)}`
    : event.type;
}

const traversal: Traversal<Snapshot, ModelEvent> = {
  input,
  events: eventsFor,
  serializeState,
  serializeEvent,
};

interface Pending {
  input: { messages: Message[]; options?: LlmOptions };
  signal: AbortSignal;
  resolve(output: unknown): void;
  reject(error: unknown): void;
}

function startScripted(compactionInput: CompactionInput, inspect: (inspection: InspectionEvent) => void) {
  const pending = new Map<InvokeId, Pending>();
  const reports: EventBody[] = [];
  const scripted = <Output, Input extends Pending["input"]>(id: InvokeId) =>
    fromPromise<Output, Input>(
      ({ input: actorInput, signal }) =>
        new Promise<Output>((resolve, reject) => {
          pending.set(id, {
            input: actorInput,
            signal,
            resolve: (output) => resolve(output as Output),
            reject,
          });
        }),
    );
  const machine = compactionMachine.provide({
    actions: { report: (_, body) => reports.push(body) },
    actors: {
      requestSummary: scripted<GenerateResponse, { messages: Message[]; options: LlmOptions }>(
        "0.compaction.requesting",
      ),
      replaceHistory: scripted<void, { messages: Message[] }>("0.compaction.replacingHistory"),
    },
  });
  const actor = createActor(machine, { input: compactionInput, inspect });
  actor.start();
  return { actor, pending, reports };
}

async function replay(path: PlannedPath<Snapshot, ModelEvent>, coverage: MachineCoverage) {
  const { actor, pending, reports } = startScripted(input, coverage.inspect);
  coverage.recordSnapshot(actor.getSnapshot());
  const writes: Message[][] = [];
  const request = pending.get("0.compaction.requesting")?.input;
  for (const step of path) {
    const { event } = step;
    const id = event.type.replace(/^xstate\.(done|error)\.actor\./, "") as InvokeId;
    const task = pending.get(id);
    if (!task) throw new Error(`${id} is not running`);
    pending.delete(id);
    if (id === "0.compaction.replacingHistory") writes.push(task.input.messages);
    if ("output" in event) task.resolve(event.output);
    else task.reject(event.error);
    await settle();
    expect(serializeState(actor.getSnapshot())).toBe(serializeState(step.state));
  }

  // The summary request: the fork plus the instruction (with the topic), and no callable tool. The
  // history holds tool calls, so the definitions stay with toolChoice "none"; reasoning stays.
  expect(request?.messages).toEqual([
    { role: "system", content: "sys" },
    ...conversation,
    { role: "user", content: compactionInstruction("travel budget") },
  ]);
  expect(request?.options).toEqual({ ...input.options, toolChoice: "none" });
  expect(canCallTools(request!.options!)).toBe(false);
  expect(reports[0]).toEqual({ kind: "ContextCompaction", phase: "started", topic: "travel budget" });

  const snapshot = actor.getSnapshot();
  if (snapshot.status === "active") return;
  expect(snapshot.status).toBe("done");
  const output = snapshot.output as CompactionOutput;
  if (snapshot.value === "compacted") {
    const expected = summaryMessage("We planned a trip to Oslo.");
    expect(output).toEqual({ ok: true, messages: [expected], tokenUsed: 42, usage: summaryUsage });
    expect(writes).toEqual([[expected]]);
    expect(reports.slice(1)).toEqual([{ kind: "ContextCompaction", phase: "completed", tokenUsed: 42 }]);
  } else {
    expect(output.ok).toBe(false);
    expect(reports.slice(1)).toEqual([
      { kind: "ContextCompaction", phase: "failed", error: snapshot.context.error },
    ]);
    // An empty summary never reaches the history.
    if (output.ok === false && output.error.code === "empty_summary") expect(writes).toEqual([]);
  }
}

describe("compaction machine (model-based)", () => {
  const edgePaths = planEdgePaths(compactionMachine, traversal);
  const simplePaths = planSimplePaths(compactionMachine, traversal);

  it("replays every edge path and every simple path, covering every state and transition", async () => {
    expect(edgePaths.length).toBeGreaterThanOrEqual(6);
    expect(simplePaths.length).toBeGreaterThanOrEqual(5);
    const coverage = createMachineCoverage(compactionMachine);
    for (const path of [...edgePaths, ...simplePaths]) await replay(path, coverage);
    const report = coverage.report();
    expect(report.states.missing).toEqual([]);
    expect(report.transitions.missing).toEqual([]);
    expect([report.states.ratio, report.transitions.ratio]).toEqual([1, 1]);
  });

  it("the coverage check notices what a replay left out", async () => {
    const coverage = createMachineCoverage(compactionMachine);
    const happy = simplePaths.find((path) => path.at(-1)?.state.value === "compacted");
    await replay(happy!, coverage);
    const report = coverage.report();
    expect(report.states.missing).toEqual(["compaction.failed"]);
    expect(report.transitions.missing).toEqual([
      "compaction.requesting --xstate.done.actor.0.compaction.requesting--> #0",
      "compaction.requesting --xstate.error.actor.0.compaction.requesting--> #0",
      "compaction.replacingHistory --xstate.error.actor.0.compaction.replacingHistory--> #0",
    ]);
    expect(report.transitions.ratio).toBeLessThan(1);
  });
});

describe("compaction machine (behaviour)", () => {
  it("without tool traffic the summary request drops the tool definitions; no topic, no focus", async () => {
    const { actor, pending } = startScripted(
      {
        messages: [{ role: "user", content: "hi" }],
        systemPrompt: "sys",
        options: { model: "m", tools: [tool] },
      },
      () => {},
    );
    const request = pending.get("0.compaction.requesting")!;
    expect(request.input.options).toEqual({ model: "m" });
    expect(request.input.messages.at(-1)).toEqual({ role: "user", content: compactionInstruction(null) });
    expect(compactionInstruction(null)).not.toContain("Focus");
    actor.stop();
    expect(request.signal.aborted).toBe(true);
  });

  it("keeps the kept tail in the history after the summary, in the same write, and out of the output", async () => {
    const tail: Message[] = [{ role: "user", content: "the running chat's question" }];
    const { actor, pending } = startScripted({ ...input, keptTail: tail }, () => {});
    const request = pending.get("0.compaction.requesting")!;
    // The tail is not summarised: the model sees only the compacted part.
    expect(JSON.stringify(request.input.messages)).not.toContain("the running chat's question");
    request.resolve({ content: "We planned a trip to Oslo.", toolCalls: [], usage: summaryUsage });
    await settle();
    const write = pending.get("0.compaction.replacingHistory")!;
    const summary = summaryMessage("We planned a trip to Oslo.");
    expect(write.input.messages).toEqual([summary, ...tail]);
    write.resolve(undefined);
    await settle();
    expect(actor.getSnapshot().output).toMatchObject({ ok: true, messages: [summary] });
  });
});
