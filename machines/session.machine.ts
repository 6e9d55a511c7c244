import { assign, emit, fromPromise, setup } from "xstate";
import type { ChatResult } from "../src/agent/agent-types.js";

/**
 * A session's mailbox as a statechart (SPEC §10): messages are processed one at a time, in order,
 * by invoked actors (`runChat`, `runCompact`, `runReset`) that the host binds with `.provide()`
 * once per process. What they run the messages on (the host's session) is `input.deps`, kept in the
 * context and handed to each invoked actor with its message.
 *
 * The queue lives in the context as plain data, and the callers waiting for an answer do not: the
 * machine only emits `message.completed` / `message.failed` / `message.dropped` with message ids,
 * and the host keeps the promise resolvers keyed by id. So a snapshot is serialisable as it is
 * (SPEC §17, durable resume).
 */

/** Past this many queued messages the oldest is dropped (SPEC §10). */
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

/** A message in the mailbox (a queued message), tagged by `kind`. */
export type MailboxMessage = ChatMessage | CompactMessage | NewMessage;

/**
 * What processing a message resolved with, tagged like the message: a chat's result; whether a
 * compaction succeeded (false when the summary was empty or the request failed); a reset done.
 */
export type MessageOutput =
  | ({ kind: "chat" } & ChatResult)
  | { kind: "compact"; compacted: boolean }
  | { kind: "new" };

/** The input of the actor that processes message `M`: the message, and the mailbox's deps. */
export type Dispatched<M extends MailboxMessage> = M & { deps?: unknown };

export interface SessionMachineContext {
  /** Waiting messages, oldest first. The one being processed is in `current`, not here. */
  queue: MailboxMessage[];
  current: MailboxMessage | null;
  maxQueue: number;
  /**
   * What the bound actors process the messages on, opaque to the machine (the host's session).
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
  | { type: "shutdown" };

/** Why a message was answered without being processed. */
export type DropReason = "superseded" | "queue_overflow" | "cancelled";

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

function idsOf(messages: readonly (MailboxMessage | null)[]): string[] {
  return messages.flatMap((message) => (message === null ? [] : [message.id]));
}

/** The output of processing a message of kind `K`. */
export type OutputOf<K extends MailboxMessage["kind"]> = Extract<MessageOutput, { kind: K }>;

function notProvided(name: string): never {
  throw new Error(`session machine: the "${name}" actor must be provided with .provide()`);
}

export const sessionMachine = setup({
  types: {
    context: {} as SessionMachineContext,
    events: {} as SessionMachineEvent,
    input: {} as SessionMachineInput,
    emitted: {} as SessionMachineEmitted,
  },
  actors: {
    runChat: fromPromise<OutputOf<"chat">, Dispatched<ChatMessage>>(async () => notProvided("runChat")),
    runCompact: fromPromise<OutputOf<"compact">, Dispatched<CompactMessage>>(async () =>
      notProvided("runCompact"),
    ),
    runReset: fromPromise<OutputOf<"new">, Dispatched<NewMessage>>(async () => notProvided("runReset")),
  },
  guards: {
    /** A stackable message whose type equals the tail's (itself stackable) type coalesces. */
    replacesTail: ({ context, event }) => {
      const message = enqueued(event);
      const tail = context.queue.at(-1);
      return isStackableChat(message) && isStackableChat(tail) && tail.type === message.type;
    },
    isQueueFull: ({ context }) => context.queue.length >= context.maxQueue,
    isNextChat: ({ context }) => context.queue[0]?.kind === "chat",
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
    dropOldestAndAppend: assign({
      queue: ({ context, event }) => [...context.queue.slice(1), enqueued(event)],
    }),
    takeNext: assign({
      current: ({ context }) => context.queue[0] ?? null,
      queue: ({ context }) => context.queue.slice(1),
    }),
    emitCompleted: emit(({ context }, params: { output: MessageOutput }) => ({
      type: "message.completed" as const,
      id: context.current?.id ?? "",
      output: params.output,
    })),
    emitFailed: emit(({ context }, params: { error: unknown }) => ({
      type: "message.failed" as const,
      id: context.current?.id ?? "",
      error: params.error,
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
  },
}).createMachine({
  id: "session",
  context: ({ input }) => ({
    queue: [],
    current: null,
    maxQueue: input?.maxQueue ?? MAILBOX_LIMIT,
    deps: input?.deps,
  }),
  initial: "idle",
  on: {
    // While busy: queue, coalescing stackable messages and dropping the oldest past the limit.
    enqueue: [
      { guard: "replacesTail", actions: ["emitSuperseded", "replaceTail"] },
      { guard: "isQueueFull", actions: ["emitOverflow", "dropOldestAndAppend"] },
      { actions: "append" },
    ],
    shutdown: { target: ".stopped", actions: ["emitAllCancelled", "clearAll"] },
  },
  states: {
    idle: {
      on: {
        enqueue: { target: "dispatching", actions: "append" },
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
        id: "runChat",
        src: "runChat",
        input: ({ context }) => ({ ...(context.current as ChatMessage), deps: context.deps }),
        onDone: {
          target: "dispatching",
          actions: [
            { type: "emitCompleted", params: ({ event }) => ({ output: event.output }) },
            "clearCurrent",
          ],
        },
        onError: {
          target: "dispatching",
          actions: [{ type: "emitFailed", params: ({ event }) => ({ error: event.error }) }, "clearCurrent"],
        },
      },
      on: {
        // Leaving the state stops the invoked actor, which aborts its signal.
        stop: { target: "idle", actions: ["emitAllCancelled", "clearAll"] },
      },
    },
    compacting: {
      invoke: {
        id: "runCompact",
        src: "runCompact",
        input: ({ context }) => ({ ...(context.current as CompactMessage), deps: context.deps }),
        onDone: {
          target: "dispatching",
          actions: [
            { type: "emitCompleted", params: ({ event }) => ({ output: event.output }) },
            "clearCurrent",
          ],
        },
        onError: {
          target: "dispatching",
          actions: [{ type: "emitFailed", params: ({ event }) => ({ error: event.error }) }, "clearCurrent"],
        },
      },
      on: {
        // Compaction works on a fork: cancelling it leaves the context as it was.
        stop: { target: "idle", actions: ["emitAllCancelled", "clearAll"] },
      },
    },
    resetting: {
      invoke: {
        id: "runReset",
        src: "runReset",
        input: ({ context }) => ({ ...(context.current as NewMessage), deps: context.deps }),
        onDone: {
          target: "dispatching",
          actions: [
            { type: "emitCompleted", params: ({ event }) => ({ output: event.output }) },
            "clearCurrent",
          ],
        },
        onError: {
          target: "dispatching",
          actions: [{ type: "emitFailed", params: ({ event }) => ({ error: event.error }) }, "clearCurrent"],
        },
      },
      on: {
        // A half-done reset would leave history and context disagreeing: let it finish, drop the rest.
        stop: { actions: ["emitQueueCancelled", "clearQueue"] },
      },
    },
    stopped: {
      type: "final",
    },
  },
});
