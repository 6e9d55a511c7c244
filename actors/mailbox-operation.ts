import { fromCallback } from "xstate";
import type {
  Dispatched,
  MailboxMessage,
  MessageOutput,
  OperationEvent,
  OperationSettled,
} from "../machines/session.machine.js";
import type { Agent, ChatOptions, ResumedChatOutcome } from "../src/agent/agent-types.js";
import type { ChatPassedOnError } from "../src/agent/chat-cancel.js";
import { describeError } from "../src/errors/describe-error.js";
import { SessionTooLargeError } from "../src/errors/session-too-large-error.js";
import { CancelledError } from "../src/llm/errors.js";

/** What a message carries besides its data (not serialisable, so kept out of the machine). */
export interface MessageOptions
  extends Pick<ChatOptions, "signal" | "onEvent" | "requestId" | "lineage" | "traceparent" | "deadline"> {
  /** A resumed chat's outcome (see {@link Agent.resumeUnfinishedChat}). */
  onOutcome?: (outcome: ResumedChatOutcome) => void;
}

/**
 * What the session's mailbox runs its messages on: the session's agent, handed over once when the
 * session is created, and two tables the session fills for its messages.
 */
export interface MailboxDeps {
  agent: Agent;
  /**
   * Each message's own options, by message id (a chat's signal, listener, request id); undefined
   * while no message has any (an idle session holds no empty table).
   */
  options: ReadonlyMap<string, MessageOptions> | undefined;
  /**
   * Chats handed to the agent and not settled yet: from then on the agent reports how they end.
   * Undefined while there are none.
   */
  started: Set<string> | undefined;
  /**
   * Bytes the agent's messages may hold in memory (`--max-session-bytes`): a session over it is
   * compacted before its next chat, which is refused if the session is still over. Default: no limit.
   */
  maxSessionBytes?: number;
  /**
   * Set when the session stops because another host takes it over: the running operation is then
   * aborted with this reason, and a chat cut off leaves its journal to that host.
   */
  passedOn?: ChatPassedOnError;
}

/**
 * The prototype of every session's mailbox deps, one per process: `toJSON` leaves the deps out of a
 * persisted snapshot (they are not data). A prototype built per session cost each idle session its
 * own object, closure and two hidden classes (about 0.5 KB).
 */
const MAILBOX_DEPS_PROTOTYPE = Object.freeze({ toJSON: () => undefined });

/** Builds {@link MailboxDeps} on the shared prototype. */
export function createMailboxDeps(fields: MailboxDeps): MailboxDeps {
  return Object.assign(Object.create(MAILBOX_DEPS_PROTOTYPE) as MailboxDeps, fields);
}

function requireMailboxDeps(deps: unknown): MailboxDeps {
  const candidate = deps as Partial<MailboxDeps> | undefined;
  if (candidate?.agent === undefined) {
    throw new TypeError(
      "the session machine was started without its agent: pass input.deps (createMailboxDeps)",
    );
  }
  return candidate as MailboxDeps;
}

/**
 * A session over `maxSessionBytes` is compacted first; still over, its chat is refused with
 * {@link SessionTooLargeError}.
 */
async function fitSession(agent: Agent, maxSessionBytes: number, signal: AbortSignal): Promise<void> {
  if ((agent.memoryBytes ?? 0) <= maxSessionBytes) return;
  let failure: string | undefined;
  const compacted = await agent.compact(undefined, { signal }).catch((error: unknown) => {
    failure = describeError(error);
    return false;
  });
  if (signal.aborted) throw new CancelledError("cancelled while the session was compacted");
  const bytes = agent.memoryBytes ?? 0;
  if (bytes <= maxSessionBytes) return;
  throw new SessionTooLargeError(
    bytes,
    maxSessionBytes,
    compacted ? undefined : (failure ?? "the summary was empty or the request failed"),
  );
}

/** Runs one message on the agent; resolves with its output or rejects with why it did not complete. */
async function runOn(input: unknown, message: MailboxMessage, signal: AbortSignal): Promise<MessageOutput> {
  const deps = requireMailboxDeps(input);
  const { agent } = deps;
  const own = deps.options?.get(message.id);
  switch (message.kind) {
    case "chat": {
      const chatSignal = own?.signal === undefined ? signal : AbortSignal.any([signal, own.signal]);
      if (chatSignal.aborted) {
        // Its caller left while it waited its turn: it never reaches the loop, so it is reported here.
        agent.reportCancelledChat?.(message.text, "the chat was cancelled before it started");
        throw new CancelledError("cancelled before it started");
      }
      // Taken from the journal's queue in the same step its chat is journaled as running.
      agent.journal?.take([message.id]);
      if (deps.maxSessionBytes !== undefined) await fitSession(agent, deps.maxSessionBytes, chatSignal);
      deps.started ??= new Set();
      deps.started.add(message.id);
      try {
        const result = await agent.chat(message.text, {
          signal: chatSignal,
          depth: message.depth,
          ...(own?.onEvent === undefined ? {} : { onEvent: own.onEvent }),
          ...(own?.requestId === undefined ? {} : { requestId: own.requestId }),
          ...(own?.lineage === undefined ? {} : { lineage: own.lineage }),
          ...(own?.traceparent === undefined ? {} : { traceparent: own.traceparent }),
          ...(own?.deadline === undefined ? {} : { deadline: own.deadline }),
        });
        return { kind: "chat", ...result };
      } finally {
        deps.started?.delete(message.id);
        if (deps.started?.size === 0) deps.started = undefined;
      }
    }
    case "compact":
      // Stopped before it began: nothing to do.
      if (signal.aborted) return { kind: "compact", compacted: false };
      return { kind: "compact", compacted: await agent.compact(message.topic, { signal }) };
    case "new":
      await agent.reset();
      return { kind: "new" };
    case "resume": {
      const resumed =
        (await agent.resumeUnfinishedChat?.({
          signal,
          ...(own?.onOutcome === undefined ? {} : { onOutcome: own.onOutcome }),
        })) ?? false;
      return { kind: "resume", resumed };
    }
  }
}

/**
 * The session mailbox's `runMessage`: hands one message to the session's agent (`chat`, `compact`,
 * `reset`, `resumeUnfinishedChat`) and sends back how it settled, exactly once. `cancel` (the
 * mailbox's `stop` / `shutdown`) aborts the operation's signal; the operation still reports when
 * it has let go, so the mailbox runs nothing else before the stopped one has written its history.
 * A chat's own signal (its caller left) aborts that chat only.
 */
export const mailboxOperation = fromCallback<OperationEvent, Dispatched>(({ input, sendBack, receive }) => {
  const abort = new AbortController();
  receive((event) => {
    if (event.type === "cancel") abort.abort((input.deps as Partial<MailboxDeps> | undefined)?.passedOn);
  });
  // An async function: whatever goes wrong, even at once, comes back as operation.failed.
  runOn(input.deps, input.message, abort.signal).then(
    (output) => sendBack({ type: "operation.done", output } satisfies OperationSettled),
    (error: unknown) => sendBack({ type: "operation.failed", error } satisfies OperationSettled),
  );
  // Stopped by its mailbox (stopped itself): the operation is aborted; nobody waits for it any more.
  return () => abort.abort();
});
