import { assign, emit, fromPromise, setup } from "xstate";
import type { TokenUsage } from "../src/llm/types.js";

/**
 * A session's mailbox as a statechart (SPEC §10): messages are processed one at a time, in order,
 * by invoked actors (`runChat`, `runCompact`, `runReset`) that the host binds with `.provide()`.
 *
 * The queue lives in the context as plain data, and the callers waiting for an answer do not: the
 * machine only emits `message.completed` / `message.failed` / `message.dropped` with message ids,
 * and the host keeps the promise resolvers keyed by id. So a snapshot is serialisable as it is
 * (SPEC §17, durable resume).
 */

/** Past this many queued messages the oldest is dropped (SPEC §10). */
export const MAILBOX_LIMIT = 200;

/** A message for the chat loop. `type` is what stackable messages coalesce on (`user`, `task_result`). */
export interface ChatMailboxMessage {
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
export interface CompactMailboxMessage {
  kind: "compact";
  id: string;
  topic?: string;
}

/** `/new`: clear context, history and ToolSet state. */
export interface NewMailboxMessage {
  kind: "new";
  id: string;
}

export type MailboxMessage = ChatMailboxMessage | CompactMailboxMessage | NewMailboxMessage;

/** What `runChat` resolves with. */
export interface ChatOutput {
  result: string;
  usage: TokenUsage;
  /** The id the chat's events carry. */
  chatId?: string;
}

/** What `runCompact` resolves with: false when the summary was empty or the request failed. */
export interface CompactOutput {
  compacted: boolean;
}

/** What `runReset` resolves with. */
export interface ResetOutput {
  reset: true;
}

export type MessageOutput = ChatOutput | CompactOutput | ResetOutput;

export interface SessionMachineContext {
  /** Waiting messages, oldest first. The one being processed is in `current`, not here. */
  queue: MailboxMessage[];
  current: MailboxMessage | null;
  maxQueue: number;
}

export interface SessionMachineInput {
  /** Default {@link MAILBOX_LIMIT}. */
  maxQueue?: number;
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

function isStackableChat(message: MailboxMessage | undefined): message is ChatMailboxMessage {
  return message?.kind === "chat" && message.stackable;
}

function idsOf(messages: readonly (MailboxMessage | null)[]): string[] {
  return messages.flatMap((message) => (message === null ? [] : [message.id]));
}

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
    runChat: fromPromise<ChatOutput, ChatMailboxMessage>(async () => notProvided("runChat")),
    runCompact: fromPromise<CompactOutput, CompactMailboxMessage>(async () => notProvided("runCompact")),
    runReset: fromPromise<ResetOutput, NewMailboxMessage>(async () => notProvided("runReset")),
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
  context: ({ input }) => ({ queue: [], current: null, maxQueue: input?.maxQueue ?? MAILBOX_LIMIT }),
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
        input: ({ context }) => context.current as ChatMailboxMessage,
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
        input: ({ context }) => context.current as CompactMailboxMessage,
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
        input: ({ context }) => context.current as NewMailboxMessage,
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
