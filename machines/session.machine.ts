import { assign, emit, fromCallback, sendTo, setup } from "xstate";
import type { ChatResult } from "../src/agent/agent-types.js";
import { InternalError } from "../src/errors/internal-error.js";

/**
 * A session's mailbox as a statechart: the session's one queue. Messages are processed one at a
 * time, in order, by the invoked `runMessage` actor, which the host binds with `.provide()` once
 * per process (actors/mailbox-operation.ts). What it runs the messages on (the session's agent) is
 * `input.deps`, kept in the context and handed to the actor with each message.
 *
 * `stop` answers the running message and the queue `cancelled` at once, but the mailbox stays in
 * its state until the running operation has settled (a stopped chat still writes its back-filled
 * history): messages that arrive meanwhile wait their turn, so two operations never overlap.
 * `shutdown` does the same and then stops the machine (`stopped`, final). `withdraw` takes one
 * queued message out (its caller no longer wants it): answered `cancelled`, it never runs, and the
 * rest of the queue and the running message go on.
 *
 * The queue lives in the context as plain data, and the callers waiting for an answer do not: the
 * machine only emits `message.completed` / `message.failed` / `message.dropped` with message ids,
 * and the host keeps the promise resolvers keyed by id. So a snapshot is serialisable as it is.
 */

/** Past this many queued messages the oldest is dropped. */
export const MAILBOX_LIMIT = 200;

/** A message for the chat loop. `type` is what stackable messages coalesce on (`user`, `task_result`). */
export interface ChatMessage {
  kind: "chat";
  id: string;
  text: string;
  type: string;
  /** When true and the queue's tail is a stackable message of the same type, it replaces the tail. */
  stackable: boolean;
  /** Depth of nested agent-to-agent calls that led to this message (0 for a user's). */
  depth: number;
}

/** `/compact [topic]`. */
export interface CompactMessage {
  kind: "compact";
  id: string;
  topic?: string;
}

/** `/new`: clear context, history and ToolSet state. */
export interface NewMessage {
  kind: "new";
  id: string;
}

/** The chat the session's last host left unfinished (its journal), run before anything queued. */
export interface ResumeMessage {
  kind: "resume";
  id: string;
}

/** A message in the mailbox (a queued message), tagged by `kind`. */
export type MailboxMessage = ChatMessage | CompactMessage | NewMessage | ResumeMessage;

/**
 * What processing a message resolved with, tagged like the message: a chat's result; whether a
 * compaction succeeded (false when the summary was empty or the request failed); a reset done;
 * whether an unfinished chat was resumed.
 */
export type MessageOutput =
  | ({ kind: "chat" } & ChatResult)
  | { kind: "compact"; compacted: boolean }
  | { kind: "new" }
  | { kind: "resume"; resumed: boolean };

/** The input of the `runMessage` actor: the message, and the mailbox's deps. */
export interface Dispatched {
  message: MailboxMessage;
  deps: unknown;
}

/** What the `runMessage` actor receives: cancel the running operation (it still reports how it settled). */
export type OperationEvent = { type: "cancel" };

/** What the `runMessage` actor sends back, exactly once, when its operation has settled. */
export type OperationSettled =
  | { type: "operation.done"; output: MessageOutput }
  | { type: "operation.failed"; error: unknown };

export interface SessionMachineContext {
  /** Waiting messages, oldest first. The one being processed is in `current`, not here. */
  queue: MailboxMessage[];
  /** The message being processed; null once it was answered by `stop` (its operation still settling). */
  current: MailboxMessage | null;
  maxQueue: number;
  /** `shutdown` arrived while an operation ran: once it settles the mailbox stops. */
  isClosing: boolean;
  /**
   * What the bound actor processes the messages on, opaque to the machine (the session's agent).
   * Not plain data: the host leaves it out when it persists a snapshot.
   */
  deps: unknown;
}

export interface SessionMachineInput {
  /** Default {@link MAILBOX_LIMIT}. */
  maxQueue?: number;
  /** See {@link SessionMachineContext.deps}. */
  deps?: unknown;
}

export type SessionMachineEvent =
  /** A new message for the mailbox. */
  | { type: "enqueue"; message: MailboxMessage }
  /** Out of band: cancel the running chat or compaction and drop the queue. */
  | { type: "stop" }
  /** The session is being passivated or the host is closing: drop everything and stop. */
  | { type: "shutdown" }
  /**
   * Out of band: the caller of the queued message `id` no longer wants it; nothing else changes. A
   * message no longer queued (running, answered) is not affected: a running one is cancelled
   * through its own operation.
   */
  | { type: "withdraw"; id: string }
  | OperationSettled;

/** Why a message was answered without being processed (`withdrawn`: by its caller, before it ran). */
export type DropReason = "superseded" | "queue_overflow" | "cancelled" | "withdrawn";

/** What the machine tells the host about messages (the host answers the waiters). */
export type SessionMachineEmitted =
  | { type: "message.completed"; id: string; output: MessageOutput }
  | { type: "message.failed"; id: string; error: unknown }
  | { type: "message.dropped"; ids: string[]; reason: DropReason };

function enqueued(event: SessionMachineEvent): MailboxMessage {
  if (event.type !== "enqueue") throw new TypeError(`expected an enqueue event, got ${event.type}`);
  return event.message;
}

function isStackableChat(message: MailboxMessage | undefined): message is ChatMessage {
  return message?.kind === "chat" && message.stackable;
}

/** A message the mailbox runs as a chat (a resumed chat is one). */
function isChatKind(message: MailboxMessage | undefined): boolean {
  return message?.kind === "chat" || message?.kind === "resume";
}

function idsOf(messages: readonly (MailboxMessage | null)[]): string[] {
  return messages.flatMap((message) => (message === null ? [] : [message.id]));
}

/** The output of processing a message of kind `K`. */
export type OutputOf<K extends MailboxMessage["kind"]> = Extract<MessageOutput, { kind: K }>;

export const sessionMachine = setup({
  types: {
    context: {} as SessionMachineContext,
    events: {} as SessionMachineEvent,
    input: {} as SessionMachineInput,
    emitted: {} as SessionMachineEmitted,
  },
  actors: {
    runMessage: fromCallback<OperationEvent, Dispatched>(() => {
      throw new InternalError('session machine: the "runMessage" actor must be provided with .provide()');
    }),
  },
  guards: {
    /** A stackable message whose type equals the tail's (itself stackable) type coalesces. */
    replacesTail: ({ context, event }) => {
      const message = enqueued(event);
      const tail = context.queue.at(-1);
      return isStackableChat(message) && isStackableChat(tail) && tail.type === message.type;
    },
    isQueueFull: ({ context }) => context.queue.length >= context.maxQueue,
    isQueued: ({ context, event }) =>
      event.type === "withdraw" && context.queue.some((message) => message.id === event.id),
    isClosing: ({ context }) => context.isClosing,
    /** The running message was already answered (`stop`): its outcome goes to nobody. */
    isAnswered: ({ context }) => context.current === null,
    isQueueEmpty: ({ context }) => context.queue.length === 0,
    isChatEnqueued: ({ event }) => isChatKind(enqueued(event)),
    isCompactEnqueued: ({ event }) => enqueued(event).kind === "compact",
    isNewEnqueued: ({ event }) => enqueued(event).kind === "new",
    isNextChat: ({ context }) => isChatKind(context.queue[0]),
    isNextCompact: ({ context }) => context.queue[0]?.kind === "compact",
    isNextNew: ({ context }) => context.queue[0]?.kind === "new",
  },
  actions: {
    append: assign({ queue: ({ context, event }) => [...context.queue, enqueued(event)] }),
    emitSuperseded: emit(({ context }) => ({
      type: "message.dropped" as const,
      ids: idsOf([context.queue.at(-1) ?? null]),
      reason: "superseded" as const,
    })),
    replaceTail: assign({ queue: ({ context, event }) => [...context.queue.slice(0, -1), enqueued(event)] }),
    emitOverflow: emit(({ context }) => ({
      type: "message.dropped" as const,
      ids: idsOf([context.queue[0] ?? null]),
      reason: "queue_overflow" as const,
    })),
    emitEnqueuedCancelled: emit(({ event }) => ({
      type: "message.dropped" as const,
      ids: [enqueued(event).id],
      reason: "cancelled" as const,
    })),
    emitWithdrawn: emit(({ event }) => ({
      type: "message.dropped" as const,
      ids: event.type === "withdraw" ? [event.id] : [],
      reason: "withdrawn" as const,
    })),
    /** Takes the first queued message with the withdrawn id out. */
    removeWithdrawn: assign({
      queue: ({ context, event }) => {
        const index = context.queue.findIndex(
          (message) => event.type === "withdraw" && message.id === event.id,
        );
        return index < 0
          ? context.queue
          : [...context.queue.slice(0, index), ...context.queue.slice(index + 1)];
      },
    }),
    dropOldestAndAppend: assign({
      queue: ({ context, event }) => [...context.queue.slice(1), enqueued(event)],
    }),
    /** An idle mailbox runs the message at once: it never joins the queue. */
    takeEnqueued: assign({ current: ({ event }) => enqueued(event) }),
    takeNext: assign({
      current: ({ context }) => context.queue[0] ?? null,
      queue: ({ context }) => context.queue.slice(1),
    }),
    emitCompleted: emit(({ context, event }) => ({
      type: "message.completed" as const,
      id: context.current?.id ?? "",
      output: event.type === "operation.done" ? event.output : ({ kind: "new" } as const),
    })),
    emitFailed: emit(({ context, event }) => ({
      type: "message.failed" as const,
      id: context.current?.id ?? "",
      error: event.type === "operation.failed" ? event.error : undefined,
    })),
    clearCurrent: assign({ current: null }),
    emitAllCancelled: emit(({ context }) => ({
      type: "message.dropped" as const,
      ids: idsOf([context.current, ...context.queue]),
      reason: "cancelled" as const,
    })),
    emitQueueCancelled: emit(({ context }) => ({
      type: "message.dropped" as const,
      ids: idsOf(context.queue),
      reason: "cancelled" as const,
    })),
    clearQueue: assign({ queue: [] }),
    clearAll: assign({ queue: [], current: null }),
    markClosing: assign({ isClosing: true }),
    cancelOperation: sendTo("operation", { type: "cancel" }),
  },
}).createMachine({
  id: "session",
  context: ({ input }) => ({
    queue: [],
    current: null,
    maxQueue: input?.maxQueue ?? MAILBOX_LIMIT,
    isClosing: false,
    deps: input?.deps,
  }),
  initial: "idle",
  on: {
    // While busy: queue, coalescing stackable messages and dropping the oldest past the limit.
    enqueue: [
      { guard: "isClosing", actions: "emitEnqueuedCancelled" },
      { guard: "replacesTail", actions: ["emitSuperseded", "replaceTail"] },
      { guard: "isQueueFull", actions: ["emitOverflow", "dropOldestAndAppend"] },
      { actions: "append" },
    ],
    withdraw: { guard: "isQueued", actions: ["emitWithdrawn", "removeWithdrawn"] },
  },
  states: {
    idle: {
      on: {
        // Straight to its state: an idle mailbox has nothing queued ahead of it.
        enqueue: [
          { guard: "isChatEnqueued", target: "processing", actions: "takeEnqueued" },
          { guard: "isCompactEnqueued", target: "compacting", actions: "takeEnqueued" },
          { guard: "isNewEnqueued", target: "resetting", actions: "takeEnqueued" },
        ],
        shutdown: { target: "stopped", actions: ["emitAllCancelled", "clearAll"] },
      },
    },
    dispatching: {
      always: [
        { guard: "isNextChat", target: "processing", actions: "takeNext" },
        { guard: "isNextCompact", target: "compacting", actions: "takeNext" },
        { guard: "isNextNew", target: "resetting", actions: "takeNext" },
        { target: "idle" },
      ],
    },
    processing: {
      invoke: {
        id: "operation",
        src: "runMessage",
        input: ({ context }) => ({ message: context.current as MailboxMessage, deps: context.deps }),
      },
      on: {
        "operation.done": [
          { guard: "isClosing", target: "stopped" },
          { guard: "isAnswered", target: "dispatching" },
          { guard: "isQueueEmpty", target: "idle", actions: ["emitCompleted", "clearCurrent"] },
          { target: "dispatching", actions: ["emitCompleted", "clearCurrent"] },
        ],
        "operation.failed": [
          { guard: "isClosing", target: "stopped" },
          { guard: "isAnswered", target: "dispatching" },
          { guard: "isQueueEmpty", target: "idle", actions: ["emitFailed", "clearCurrent"] },
          { target: "dispatching", actions: ["emitFailed", "clearCurrent"] },
        ],
        // Answered at once; the chat winds down (writes its back-fill) before the next message runs.
        stop: { actions: ["emitAllCancelled", "clearAll", "cancelOperation"] },
        shutdown: { actions: ["emitAllCancelled", "clearAll", "markClosing", "cancelOperation"] },
      },
    },
    compacting: {
      invoke: {
        id: "operation",
        src: "runMessage",
        input: ({ context }) => ({ message: context.current as MailboxMessage, deps: context.deps }),
      },
      on: {
        "operation.done": [
          { guard: "isClosing", target: "stopped" },
          { guard: "isAnswered", target: "dispatching" },
          { guard: "isQueueEmpty", target: "idle", actions: ["emitCompleted", "clearCurrent"] },
          { target: "dispatching", actions: ["emitCompleted", "clearCurrent"] },
        ],
        "operation.failed": [
          { guard: "isClosing", target: "stopped" },
          { guard: "isAnswered", target: "dispatching" },
          { guard: "isQueueEmpty", target: "idle", actions: ["emitFailed", "clearCurrent"] },
          { target: "dispatching", actions: ["emitFailed", "clearCurrent"] },
        ],
        // Compaction works on a fork: cancelling it leaves the context as it was.
        stop: { actions: ["emitAllCancelled", "clearAll", "cancelOperation"] },
        shutdown: { actions: ["emitAllCancelled", "clearAll", "markClosing", "cancelOperation"] },
      },
    },
    resetting: {
      invoke: {
        id: "operation",
        src: "runMessage",
        input: ({ context }) => ({ message: context.current as MailboxMessage, deps: context.deps }),
      },
      on: {
        "operation.done": [
          { guard: "isClosing", target: "stopped" },
          { guard: "isQueueEmpty", target: "idle", actions: ["emitCompleted", "clearCurrent"] },
          { target: "dispatching", actions: ["emitCompleted", "clearCurrent"] },
        ],
        "operation.failed": [
          { guard: "isClosing", target: "stopped" },
          { guard: "isQueueEmpty", target: "idle", actions: ["emitFailed", "clearCurrent"] },
          { target: "dispatching", actions: ["emitFailed", "clearCurrent"] },
        ],
        // A half-done reset would leave history and context disagreeing: let it finish, drop the rest.
        stop: { actions: ["emitQueueCancelled", "clearQueue"] },
        // Its caller is answered at once; the mailbox stops once the reset has finished.
        shutdown: { actions: ["emitAllCancelled", "clearAll", "markClosing"] },
      },
    },
    stopped: {
      type: "final",
    },
  },
});
