import { describe, expect, it } from "vitest";
import { createActor, fromCallback, type SnapshotFrom } from "xstate";
import {
  type Dispatched,
  type MailboxMessage,
  type MessageOutput,
  type OperationEvent,
  type OperationSettled,
  type SessionMachineEmitted,
  type SessionMachineEvent,
  sessionMachine,
} from "../../machines/session.machine.js";
import { emptyUsage } from "../../src/llm/types.js";
import {
  createMachineCoverage,
  type MachineCoverage,
  planEdgePaths,
  type Traversal,
} from "../../src/testing/index.js";

/**
 * Model-based tests of the session mailbox: every path the graph traversal finds (the shortest path
 * to every state, extended by every event enabled there) is replayed against the real machine with
 * a scripted `runMessage` actor; the test itself checks that every state node and every transition
 * was taken.
 */

type Snapshot = SnapshotFrom<typeof sessionMachine>;

/** A small limit keeps the state space finite and overflow reachable. */
const MAX_QUEUE = 2;

const userMessage: MailboxMessage = {
  kind: "chat",
  id: "m",
  text: "hi",
  type: "user",
  stackable: false,
  depth: 0,
};
const taskMessage: MailboxMessage = {
  kind: "chat",
  id: "m",
  text: "<task_result/>",
  type: "task_result",
  stackable: true,
  depth: 0,
};
const compactMessage: MailboxMessage = { kind: "compact", id: "m", topic: "plans" };
const newMessage: MailboxMessage = { kind: "new", id: "m" };

/** What the scripted operation of each busy state resolves with. */
const OUTPUT_OF_STATE: Record<string, MessageOutput | undefined> = {
  processing: { kind: "chat", result: "done", usage: { prompt: 1, completion: 1, total: 2, cached: 0 } },
  compacting: { kind: "compact", compacted: true },
  resetting: { kind: "new" },
};

function eventsFor(snapshot: Snapshot): SessionMachineEvent[] {
  if (snapshot.status !== "active") return [];
  const events: SessionMachineEvent[] = [
    { type: "enqueue", message: userMessage },
    { type: "enqueue", message: taskMessage },
    { type: "enqueue", message: compactMessage },
    { type: "enqueue", message: newMessage },
    { type: "stop" },
    { type: "shutdown" },
  ];
  // Withdrawn by id: the replay names the first queued message (every id is "m" in the traversal).
  if (snapshot.context.queue.length > 0) events.push({ type: "withdraw", id: "m" });
  const output = OUTPUT_OF_STATE[String(snapshot.value)];
  if (output !== undefined) {
    events.push({ type: "operation.done", output });
    events.push({ type: "operation.failed", error: new Error("boom") });
  }
  return events;
}

function label(message: MailboxMessage | null): string {
  if (message === null) return "-";
  return message.kind === "chat" ? `${message.type}${message.stackable ? "*" : ""}` : message.kind;
}

/** Abstract state: ids and texts do not matter to the machine's behaviour, kinds and order do. */
function serializeState(snapshot: Snapshot): string {
  const { queue, current, isClosing } = snapshot.context;
  return JSON.stringify([snapshot.status, snapshot.value, label(current), queue.map(label), isClosing]);
}

function serializeEvent(event: SessionMachineEvent): string {
  return event.type === "enqueue" ? `enqueue:${label(event.message)}` : event.type;
}

const traversal: Traversal<Snapshot, SessionMachineEvent> = {
  input: { maxQueue: MAX_QUEUE },
  events: eventsFor,
  serializeState,
  serializeEvent,
};

/** The running operation of the scripted actor: its message, whether it was told to cancel, its way back. */
interface Running {
  message: MailboxMessage;
  isCancelled: boolean;
  settle(event: OperationSettled): void;
}

/** The real machine with a scripted operation actor that the replay settles. */
function startScriptedSession(coverage: MachineCoverage) {
  const running: { current: Running | undefined } = { current: undefined };
  const started: string[] = [];
  const machine = sessionMachine.provide({
    actors: {
      runMessage: fromCallback<OperationEvent, Dispatched>(({ input, sendBack, receive }) => {
        started.push(input.message.id);
        const operation: Running = { message: input.message, isCancelled: false, settle: sendBack };
        running.current = operation;
        receive((event) => {
          if (event.type === "cancel") operation.isCancelled = true;
        });
      }),
    },
  });
  const actor = createActor(machine, {
    input: { maxQueue: MAX_QUEUE },
    inspect: coverage.inspect,
  });
  const emitted: SessionMachineEmitted[] = [];
  actor.on("*", (event) => emitted.push(event as SessionMachineEmitted));
  actor.start();
  coverage.recordSnapshot(actor.getSnapshot());
  return { actor, running, started, emitted };
}

describe("session machine (model-based)", () => {
  const paths = planEdgePaths(sessionMachine, traversal);

  it("finds a finite, non-trivial state graph", () => {
    expect(paths.length).toBeGreaterThan(50);
  });

  it("replays every path on the real machine, answering every message exactly once", () => {
    const coverage = createMachineCoverage(sessionMachine);
    for (const path of paths) {
      const { actor, running, started, emitted } = startScriptedSession(coverage);
      let nextId = 0;
      const enqueuedIds: string[] = [];
      const completedIds = new Set<string>();
      for (const step of path) {
        const { event } = step;
        const before = actor.getSnapshot();
        if (event.type === "enqueue") {
          const id = `m${++nextId}`;
          enqueuedIds.push(id);
          actor.send({ type: "enqueue", message: { ...event.message, id } });
        } else if (event.type === "withdraw") {
          const first = before.context.queue[0];
          if (first === undefined) throw new Error("nothing queued to withdraw");
          actor.send({ type: "withdraw", id: first.id });
          expect(emitted.at(-1)).toEqual({ type: "message.dropped", ids: [first.id], reason: "withdrawn" });
        } else if (event.type === "stop" || event.type === "shutdown") {
          actor.send(event);
          // A running chat or compaction is told to cancel, and stays until it has settled.
          if (before.value === "processing" || before.value === "compacting") {
            expect(running.current?.isCancelled).toBe(true);
            expect(actor.getSnapshot().value).toBe(before.value);
          }
        } else {
          const operation = running.current;
          if (operation === undefined) throw new Error("no running operation");
          running.current = undefined;
          const { current, isClosing } = before.context;
          if (event.type === "operation.done" && current !== null && !isClosing) completedIds.add(current.id);
          operation.settle(event);
        }
        expect(serializeState(actor.getSnapshot())).toBe(serializeState(step.state));
      }
      if (actor.getSnapshot().status === "active") actor.send({ type: "shutdown" });
      // A shutdown waits for the running operation to settle.
      if (actor.getSnapshot().status === "active")
        running.current?.settle({ type: "operation.failed", error: null });
      expect(actor.getSnapshot().value).toBe("stopped");

      // Every enqueued message answered exactly once; completions only for what the actor finished.
      const answered = emitted.flatMap((event) =>
        event.type === "message.dropped" ? event.ids : [event.id],
      );
      expect([...answered].sort()).toEqual([...enqueuedIds].sort());
      const completed = emitted.flatMap((event) => (event.type === "message.completed" ? [event.id] : []));
      expect(new Set(completed)).toEqual(completedIds);
      // Messages are started in the order they were enqueued.
      expect(started.map((id) => Number(id.slice(1)))).toEqual(
        [...started.map((id) => Number(id.slice(1)))].sort((a, b) => a - b),
      );
    }

    const { states, transitions } = coverage.report();
    expect(states.missing).toEqual([]);
    expect(states.ratio).toBe(1);
    expect(transitions.total).toBeGreaterThan(15);
    expect(transitions.missing).toEqual([]);
    expect(transitions.ratio).toBe(1);
  });
});

describe("session machine (behaviour)", () => {
  const chat = (id: string, overrides: Partial<MailboxMessage> = {}): SessionMachineEvent => ({
    type: "enqueue",
    message: {
      kind: "chat",
      id,
      text: id,
      type: "user",
      stackable: false,
      depth: 0,
      ...overrides,
    } as MailboxMessage,
  });
  const task = (id: string) => chat(id, { type: "task_result", stackable: true } as Partial<MailboxMessage>);

  function start() {
    const operations: {
      message: MailboxMessage;
      cancelled: boolean;
      settle(event: OperationSettled): void;
    }[] = [];
    const actor = createActor(
      sessionMachine.provide({
        actors: {
          runMessage: fromCallback<OperationEvent, Dispatched>(({ input, sendBack, receive }) => {
            const operation = { message: input.message, cancelled: false, settle: sendBack };
            operations.push(operation);
            receive(() => {
              operation.cancelled = true;
            });
          }),
        },
      }),
      { input: {} },
    );
    const emitted: SessionMachineEmitted[] = [];
    actor.on("*", (event) => emitted.push(event as SessionMachineEmitted));
    actor.start();
    return { actor, emitted, operations };
  }

  it("queues up to 200 messages and drops the oldest past that with queue_overflow", () => {
    const { actor, emitted } = start();
    actor.send(chat("running"));
    for (let index = 1; index <= 201; index++) actor.send(chat(`q${index}`));
    const { queue } = actor.getSnapshot().context;
    expect(queue).toHaveLength(200);
    expect(queue[0]?.id).toBe("q2");
    expect(queue.at(-1)?.id).toBe("q201");
    expect(emitted).toEqual([{ type: "message.dropped", ids: ["q1"], reason: "queue_overflow" }]);
  });

  it("coalesces a stackable message onto a stackable tail of the same type only", () => {
    const { actor, emitted } = start();
    actor.send(chat("running"));
    actor.send(task("t1"));
    actor.send(task("t2"));
    actor.send(chat("u1"));
    actor.send(task("t3"));
    actor.send(chat("u2", { stackable: true } as Partial<MailboxMessage>));
    actor.send(chat("u3", { stackable: true } as Partial<MailboxMessage>));
    expect(actor.getSnapshot().context.queue.map((message) => message.id)).toEqual(["t2", "u1", "t3", "u3"]);
    expect(emitted).toEqual([
      { type: "message.dropped", ids: ["t1"], reason: "superseded" },
      { type: "message.dropped", ids: ["u2"], reason: "superseded" },
    ]);
  });

  it("never coalesces a non-stackable message, even onto a stackable tail of its type", () => {
    const { actor } = start();
    actor.send(chat("running"));
    actor.send(chat("s1", { stackable: true } as Partial<MailboxMessage>));
    actor.send(chat("plain"));
    expect(actor.getSnapshot().context.queue.map((message) => message.id)).toEqual(["s1", "plain"]);
  });

  it("withdraw takes only that queued message out: it never runs, the running one and the rest go on", () => {
    const { actor, emitted, operations } = start();
    actor.send(chat("running"));
    actor.send(chat("q1"));
    actor.send(chat("q2"));
    actor.send({ type: "withdraw", id: "q1" });
    // Not queued (running, or unknown): nothing happens.
    actor.send({ type: "withdraw", id: "running" });
    actor.send({ type: "withdraw", id: "nobody" });
    expect(emitted).toEqual([{ type: "message.dropped", ids: ["q1"], reason: "withdrawn" }]);
    expect(operations[0]?.cancelled).toBe(false);
    operations[0]?.settle({ type: "operation.done", output: { kind: "new" } });
    expect(operations.map((operation) => operation.message.id)).toEqual(["running", "q2"]);
  });

  it("stop answers the running message and the whole queue at once; the next message waits until the stopped one settled", () => {
    const { actor, emitted, operations } = start();
    actor.send(chat("running"));
    actor.send(chat("q1"));
    actor.send({ type: "enqueue", message: { kind: "compact", id: "c1" } });
    actor.send({ type: "stop" });
    expect(emitted).toEqual([{ type: "message.dropped", ids: ["running", "q1", "c1"], reason: "cancelled" }]);
    expect(operations[0]?.cancelled).toBe(true);
    // Still winding down (writing its history): a new message waits behind it.
    expect(actor.getSnapshot().value).toBe("processing");
    actor.send(chat("after"));
    expect(operations).toHaveLength(1);
    operations[0]?.settle({ type: "operation.failed", error: new Error("cancelled") });
    // The stopped chat's outcome goes to nobody: it was answered.
    expect(emitted).toHaveLength(1);
    expect(actor.getSnapshot().value).toBe("processing");
    expect(actor.getSnapshot().context.current?.id).toBe("after");
    expect(operations.map((operation) => operation.message.id)).toEqual(["running", "after"]);
  });

  it("shutdown answers everything at once and stops once the running operation settled", () => {
    const { actor, emitted, operations } = start();
    actor.send(chat("running"));
    actor.send(chat("q1"));
    actor.send({ type: "shutdown" });
    expect(emitted).toEqual([{ type: "message.dropped", ids: ["running", "q1"], reason: "cancelled" }]);
    expect(actor.getSnapshot().status).toBe("active");
    actor.send(chat("late"));
    expect(emitted.at(-1)).toEqual({ type: "message.dropped", ids: ["late"], reason: "cancelled" });
    operations[0]?.settle({
      type: "operation.done",
      output: { kind: "chat", result: "", usage: emptyUsage() },
    });
    expect(actor.getSnapshot().value).toBe("stopped");
    expect(actor.getSnapshot().status).toBe("done");
    expect(emitted).toHaveLength(2);
  });

  it("runs a resumed chat as a chat, before what was queued behind it", () => {
    const { actor, emitted, operations } = start();
    actor.send({ type: "enqueue", message: { kind: "resume", id: "r" } });
    actor.send(chat("queued"));
    expect(actor.getSnapshot().value).toBe("processing");
    operations[0]?.settle({ type: "operation.done", output: { kind: "resume", resumed: true } });
    expect(emitted).toEqual([
      { type: "message.completed", id: "r", output: { kind: "resume", resumed: true } },
    ]);
    expect(operations.map((operation) => operation.message.id)).toEqual(["r", "queued"]);
  });

  it("a snapshot with a queue is plain JSON", () => {
    const { actor } = start();
    actor.send(chat("running"));
    actor.send(task("t1"));
    const persisted = actor.getPersistedSnapshot() as unknown as { context: unknown };
    expect(JSON.parse(JSON.stringify(persisted.context))).toEqual(persisted.context);
  });
});
