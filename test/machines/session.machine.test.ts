import { describe, expect, it } from "vitest";
import { createActor, fromPromise, type SnapshotFrom } from "xstate";
import {
  type ChatMessage,
  type CompactMessage,
  type MailboxMessage,
  type MessageOutput,
  type NewMessage,
  type OutputOf,
  type SessionMachineEmitted,
  type SessionMachineEvent,
  sessionMachine,
} from "../../machines/session.machine.js";
import {
  createMachineCoverage,
  type MachineCoverage,
  planEdgePaths,
  type Traversal,
} from "../../src/testing/index.js";

/**
 * Model-based tests of the session mailbox: every path the graph traversal finds (the shortest path
 * to every state, extended by every event enabled there) is replayed against the real machine with
 * scripted actors; the test itself checks that every state node and every transition was taken.
 */

type Snapshot = SnapshotFrom<typeof sessionMachine>;
type InvokeId = "runChat" | "runCompact" | "runReset";
/** Machine events plus the done/error events of the invoked actors the traversal feeds in. */
type ModelEvent =
  | SessionMachineEvent
  | { type: `xstate.done.actor.${InvokeId}`; output: MessageOutput }
  | { type: `xstate.error.actor.${InvokeId}`; error: Error };

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

const INVOKE_OF_STATE: Record<string, { id: InvokeId; output: MessageOutput } | undefined> = {
  processing: {
    id: "runChat",
    output: { kind: "chat", result: "done", usage: { prompt: 1, completion: 1, total: 2, cached: 0 } },
  },
  compacting: { id: "runCompact", output: { kind: "compact", compacted: true } },
  resetting: { id: "runReset", output: { kind: "new" } },
};

function eventsFor(snapshot: Snapshot): ModelEvent[] {
  if (snapshot.status !== "active") return [];
  const events: ModelEvent[] = [
    { type: "enqueue", message: userMessage },
    { type: "enqueue", message: taskMessage },
    { type: "enqueue", message: compactMessage },
    { type: "enqueue", message: newMessage },
    { type: "stop" },
    { type: "shutdown" },
  ];
  const invoked = INVOKE_OF_STATE[String(snapshot.value)];
  if (invoked !== undefined) {
    events.push({ type: `xstate.done.actor.${invoked.id}`, output: invoked.output });
    events.push({ type: `xstate.error.actor.${invoked.id}`, error: new Error("boom") });
  }
  return events;
}

function label(message: MailboxMessage | null): string {
  if (message === null) return "-";
  return message.kind === "chat" ? `${message.type}${message.stackable ? "*" : ""}` : message.kind;
}

/** Abstract state: ids and texts do not matter to the machine's behaviour, kinds and order do. */
function serializeState(snapshot: Snapshot): string {
  const { queue, current } = snapshot.context;
  return JSON.stringify([snapshot.status, snapshot.value, label(current), queue.map(label)]);
}

function serializeEvent(event: ModelEvent): string {
  return event.type === "enqueue" ? `enqueue:${label(event.message)}` : event.type;
}

const traversal: Traversal<Snapshot, ModelEvent> = {
  input: { maxQueue: MAX_QUEUE },
  events: eventsFor,
  serializeState,
  serializeEvent,
};

interface Pending {
  input: MailboxMessage;
  signal: AbortSignal;
  resolve(output: MessageOutput): void;
  reject(error: unknown): void;
}

/** The real machine with scripted actors whose promises the replay settles. */
function startScriptedSession(coverage: MachineCoverage) {
  const pending = new Map<InvokeId, Pending>();
  const started: string[] = [];
  const scripted = <Output extends MessageOutput, Input extends MailboxMessage>(id: InvokeId) =>
    fromPromise<Output, Input>(
      ({ input, signal }) =>
        new Promise<Output>((resolve, reject) => {
          started.push(input.id);
          pending.set(id, { input, signal, resolve: (output) => resolve(output as Output), reject });
        }),
    );
  const machine = sessionMachine.provide({
    actors: {
      runChat: scripted<OutputOf<"chat">, ChatMessage>("runChat"),
      runCompact: scripted<OutputOf<"compact">, CompactMessage>("runCompact"),
      runReset: scripted<OutputOf<"new">, NewMessage>("runReset"),
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
  return { actor, pending, started, emitted };
}

const settle = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("session machine (model-based)", () => {
  const paths = planEdgePaths(sessionMachine, traversal);

  it("finds a finite, non-trivial state graph", () => {
    expect(paths.length).toBeGreaterThan(50);
  });

  it("replays every path on the real machine, answering every message exactly once", async () => {
    const coverage = createMachineCoverage(sessionMachine);
    for (const path of paths) {
      const { actor, pending, started, emitted } = startScriptedSession(coverage);
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
        } else if (event.type === "stop" || event.type === "shutdown") {
          const running = INVOKE_OF_STATE[String(before.value)];
          const task = running === undefined ? undefined : pending.get(running.id);
          actor.send(event);
          // Leaving the state stops the invoked actor: its signal must be aborted (resetting is not left).
          if (task !== undefined && (before.value !== "resetting" || event.type === "shutdown")) {
            expect(task.signal.aborted).toBe(true);
          }
        } else {
          const id = event.type.replace(/^xstate\.(done|error)\.actor\./, "") as InvokeId;
          const task = pending.get(id);
          if (task === undefined) throw new Error(`no pending ${id}`);
          pending.delete(id);
          if ("output" in event) {
            completedIds.add(task.input.id);
            task.resolve(event.output);
          } else task.reject(event.error);
          await settle();
        }
        expect(serializeState(actor.getSnapshot())).toBe(serializeState(step.state));
      }
      if (actor.getSnapshot().status === "active") actor.send({ type: "shutdown" });
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
    const actor = createActor(
      sessionMachine.provide({
        actors: {
          runChat: fromPromise<OutputOf<"chat">, ChatMessage>(() => new Promise(() => {})),
          runCompact: fromPromise<OutputOf<"compact">, CompactMessage>(() => new Promise(() => {})),
          runReset: fromPromise<OutputOf<"new">, NewMessage>(() => new Promise(() => {})),
        },
      }),
      { input: {} },
    );
    const emitted: SessionMachineEmitted[] = [];
    actor.on("*", (event) => emitted.push(event as SessionMachineEmitted));
    actor.start();
    return { actor, emitted };
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

  it("stop cancels the running message and the whole queue, then accepts new messages", () => {
    const { actor, emitted } = start();
    actor.send(chat("running"));
    actor.send(chat("q1"));
    actor.send({ type: "enqueue", message: { kind: "compact", id: "c1" } });
    actor.send({ type: "stop" });
    expect(actor.getSnapshot().value).toBe("idle");
    expect(emitted).toEqual([{ type: "message.dropped", ids: ["running", "q1", "c1"], reason: "cancelled" }]);
    actor.send(chat("after"));
    expect(actor.getSnapshot().value).toBe("processing");
    expect(actor.getSnapshot().context.current?.id).toBe("after");
  });

  it("a snapshot with a queue is plain JSON", () => {
    const { actor } = start();
    actor.send(chat("running"));
    actor.send(task("t1"));
    const persisted = actor.getPersistedSnapshot() as unknown as { context: unknown };
    expect(JSON.parse(JSON.stringify(persisted.context))).toEqual(persisted.context);
  });
});
