import type { ContextHistory } from "../context/context-history.js";
import type { EventEmitter } from "../events/event-emitter.js";
import type { LlmClient } from "../llm/llm-client.js";
import type { Message, ToolCall } from "../llm/types.js";
import type { SecretRedactor } from "../text/secret-redactor.js";
import type { ToolContext, ToolSet } from "../tools/tool-set.js";

/** A call held for approval, as announced (see `announceApprovals`). */
export interface ApprovalRequest {
  toolCallId: string;
  toolName: string;
  arguments: string;
}

/**
 * What the actors and actions of one agent session need. Its functions are called as methods
 * (`deps.recordMessage(message)`), never taken off the object: a session's are prototype methods. Built once per session by `createAgent`
 * and handed to the machines explicitly: the chat and compaction machines take it as `input.deps`,
 * keep it in their context, and pass it on in the input of every actor they invoke or spawn. The
 * machines themselves are bound to their actors once per process (`bound-machines.ts`), so an idle
 * session holds this object and no machine copies.
 */
export interface SessionDeps {
  llm: LlmClient;
  events: EventEmitter;
  history: ContextHistory | undefined;
  toolSets: readonly ToolSet[];
  /** Runs a tool call under the session's cap: at most maxConcurrentToolCalls at once. */
  limitToolCall<T>(task: () => Promise<T>): Promise<T>;
  /**
   * The parts of the ToolContext that come from the session (agent, session, post, depth): a new
   * object at each call, which the tool-call actor completes (signal, call id…) and hands the tool.
   */
  toolContext(): Omit<ToolContext, "signal" | "appendMessage">;
  recordMessage(message: Message): void;
  /** Whether a call must be approved by a person before it runs (its ToolSet, or the agent's list). */
  needsApproval(call: ToolCall): boolean;
  /** The iteration holds calls for approval: publish the requests, persist the chat. */
  announceApprovals(iteration: number, requests: readonly ApprovalRequest[]): void;
  /** Hides the configured secrets in tool results (events are redacted by `events` itself). */
  redactor: SecretRedactor;
  now(): number;
  /** The W3C `traceparent` of a started tool call's span, when tracing is on. */
  traceparentOf?(toolCallId: string): string | undefined;
  /** Journals a call's start before it runs (after a crash, a call in doubt is never run again silently). */
  noteToolStart?(call: ToolCall): Promise<void>;
}

/**
 * The base of every deps object: `toJSON` leaves it out of a JSON snapshot (a chat parked awaiting
 * approval is stored as JSON, then handed its session's deps again when restored). A session's
 * deps are a subclass whose fields are getters on the prototype (see `AgentSession`), so no
 * closure or field is copied per session; {@link createSessionDeps} makes one from plain fields.
 */
export class SessionDepsBase {
  toJSON(): undefined {
    return undefined;
  }
}

/**
 * Wraps a session's dependencies for the machines' context. Its fields are not enumerable: XState
 * walks a context's enumerable fields when it persists a snapshot, and these lead into SDK clients,
 * databases and sockets. So a persisted snapshot keeps the reference, JSON drops it, and nothing
 * else of the session is copied.
 */
export function createSessionDeps(fields: SessionDeps): SessionDeps {
  const deps = Object.create(SessionDepsBase.prototype) as SessionDeps;
  for (const [key, value] of Object.entries(fields)) {
    Object.defineProperty(deps, key, { value, enumerable: false });
  }
  return deps;
}

/**
 * The deps a bound machine was started with; a clear error at its first step when there are none
 * (a machine started outside `createAgent` with no `input.deps`).
 */
export function requireDeps(deps: SessionDeps | undefined, machine: string): SessionDeps {
  if (!(deps instanceof SessionDepsBase)) {
    throw new TypeError(
      `the ${machine} machine was started without its session's dependencies: pass input.deps (see createAgent)`,
    );
  }
  return deps as SessionDeps;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}

/**
 * A persisted machine snapshot (a parked chat) handed its session's deps again: JSON left them out
 * of the snapshot's context and of its invoked machines' contexts.
 */
export function withSessionDeps(
  snapshot: Record<string, unknown>,
  deps: SessionDeps,
): Record<string, unknown> {
  const { context, children } = snapshot;
  const restored: Record<string, unknown> = { ...snapshot };
  if (isRecord(context)) restored.context = { ...context, deps };
  if (isRecord(children)) {
    restored.children = Object.fromEntries(
      Object.entries(children).map(([id, child]) => [
        id,
        isRecord(child) && isRecord(child.snapshot)
          ? { ...child, snapshot: withSessionDeps(child.snapshot, deps) }
          : child,
      ]),
    );
  }
  return restored;
}
