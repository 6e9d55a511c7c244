import type { LimitFunction } from "p-limit";
import type { ApprovalRequest } from "../machines/iteration.machine.js";
import type { ContextHistory } from "../src/context/context-history.js";
import type { LlmClient } from "../src/llm/llm-client.js";
import type { Message, ToolCall } from "../src/llm/types.js";
import type { SecretRedactor } from "../src/text/secret-redactor.js";
import type { ToolContext, ToolSet } from "../src/tools/tool-set.js";
import type { EventEmitter } from "./event-publisher.js";

/**
 * What the actors of one session need. The machines are bound to their actors once per process;
 * each running chat registers its session's dependencies under its actor system, and the actors
 * look them up there. So an idle session costs no machine copies, and snapshots stay plain data.
 */
export interface SessionDeps {
  llm: LlmClient;
  events: EventEmitter;
  history: ContextHistory | undefined;
  toolSets: readonly ToolSet[];
  /** Shared by every call of the session: at most maxConcurrentToolCalls run at once. */
  limit: LimitFunction;
  /** The parts of the ToolContext that come from the session (agent, session, post, depth). */
  toolContext(): Omit<ToolContext, "signal" | "appendMessage">;
  recordMessage(message: Message): void;
  /** Whether a call must be approved by a person before it runs (its ToolSet, or the agent's list). */
  needsApproval(call: ToolCall): boolean;
  /** The iteration holds calls for approval: publish the requests, persist the chat. */
  announceApprovals(iteration: number, requests: readonly ApprovalRequest[]): void;
  /** Hides the configured secrets in tool results (events are redacted by `events` itself). */
  redactor: SecretRedactor;
  now(): number;
  /** Journals a call's start before it runs (issue 11: a call in doubt is never re-run silently). */
  noteToolStart?(call: ToolCall): Promise<void>;
}

const registry = new WeakMap<object, SessionDeps>();

/** Registers a session's dependencies for every actor of `system` (a root actor's system). */
export function bindSessionDeps(system: object, deps: SessionDeps): void {
  registry.set(system, deps);
}

/** The dependencies of the session an actor belongs to. */
export function sessionDepsOf(system: object): SessionDeps {
  const deps = registry.get(system);
  if (!deps) throw new Error("no session is bound to this actor system (bindSessionDeps was not called)");
  return deps;
}
