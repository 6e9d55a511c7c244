import { createHash } from "node:crypto";
import { z } from "zod";
import type { Bus, BusMessage } from "../bus/bus.js";
import { BusTimeoutError, NoRespondersError } from "../bus/bus-errors.js";
import { parseChatReply } from "../bus/contract.js";
import { HostSilentError, requestWithHeartbeat } from "../bus/request-with-heartbeat.js";
import {
  chatSubject,
  controlSubject,
  DEFAULT_PREFIX,
  NAME_PATTERN,
  sessionHeartbeatSubject,
} from "../bus/subjects.js";
import { type ChatLineage, describeChain, isOnChain, lineageHeaders } from "../contract/chat-lineage.js";
import {
  DEFAULT_PARENT_LEASE_MS,
  parentLeaseHeaders,
  parentWaitingSubject,
  renewParentLease,
} from "../contract/parent-lease.js";
import { describeError } from "../errors/describe-error.js";
import { sleep } from "../timers/sleep.js";
import { type A2aCallSettings, A2aTarget, askA2aTarget } from "./ask-a2a-agent.js";
import { askProtocolTarget, type ProtocolCallSettings, ProtocolTarget } from "./ask-protocol-agent.js";
import { relayChildProgress } from "./child-progress.js";
import { createToolSet, type StatefulToolSet } from "./create-tool-set.js";
import { defineTool } from "./define-tool.js";
import { AgentCallError, type AgentCallErrorCode, ToolCancelledError, ToolError } from "./tool-errors.js";
import type { AskedChatRef, ToolContext } from "./tool-set.js";

/** Nested agent-to-agent calls allowed below a user's message, so agents asking each other cannot loop forever. */
export const DEFAULT_ASK_AGENT_MAX_DEPTH = 3;

/** How long `ask_agent` waits for the other agent's reply by default. */
export const DEFAULT_ASK_AGENT_TIMEOUT_MS = 5 * 60 * 1000;

const TOOL_NAME = "ask_agent";

export const AskAgentArguments = z.object({
  agent: z
    .string()
    .regex(NAME_PATTERN, { error: "an agent name: letters, digits, _ and -" })
    .optional()
    .describe("The name of the agent to ask (an agent of this system). Leave it out when giving target."),
  target: z.union([A2aTarget, ProtocolTarget]).optional(),
  message: z.string().min(1).describe("The complete question or task: the other agent sees nothing else."),
});
export type AskAgentArguments = z.infer<typeof AskAgentArguments>;

export interface AskAgentToolSetOptions {
  bus: Bus;
  /** Subject prefix; default `agentloop`. */
  prefix?: string;
  /** The agent the set belongs to; defaults to the calling chat's agent. Asking it is refused. */
  agent?: string;
  /** Other agents worth mentioning to the model (the description lists them). */
  peers?: readonly string[];
  /** Default 3: a chat at this depth may not ask further. */
  maxDepth?: number;
  /** Default 5 minutes. */
  timeoutMs?: number;
  /** The other agent's host counts as gone after this long without a heartbeat; default 10 s. */
  heartbeatTimeoutMs?: number;
  /** How `target` calls reach agents on the NATS agent protocol. */
  protocol?: ProtocolCallSettings;
  /** What the asking chat does when the asked agent fails; default: the model gets the error. */
  supervision?: SupervisionPolicy;
  /** How often an asked chat's text is reported as progress at most; default 250 ms. */
  progressIntervalMs?: number;
  /** How `target: { a2a }` calls reach A2A agents. */
  a2a?: A2aCallSettings;
  /**
   * How long an asked chat (by name or protocol target) runs on without hearing that this one
   * still waits (its lease on this chat, renewed every fifth of it); default 30 s.
   */
  parentLeaseMs?: number;
}

/**
 * What an asking chat does when the agent it asked fails (its chat failed, or it was not there):
 * `report` gives the model the failure as a typed tool error (the default); `retry` asks again up
 * to `times` more times, waiting `backoffMs` × 2^(n−1) before the n-th retry, then reports; `fail`
 * ends the asking chat too, its `ChatFailed` naming the asked agent's failure (code
 * `agent_failed`), so a failure climbs the tree as far as the agents on it say so. A cycle, the
 * depth cap and a refusal are never retried nor fatal: asking again cannot change them, and the
 * model can still answer without that agent.
 */
export type SupervisionPolicy =
  | { kind: "report" }
  | { kind: "retry"; times: number; backoffMs: number }
  | { kind: "fail" };

/** The default {@link SupervisionPolicy}: the model gets the failure and decides. */
export const DEFAULT_SUPERVISION: SupervisionPolicy = { kind: "report" };

/** How long the stop sent to an asked chat waits for its host's answer (nobody waits on it). */
const STOP_TIMEOUT_MS = 5_000;
/**
 * How long a call whose asked chat failed past their shared deadline waits for its own chat's stop,
 * which the same deadline triggers on this host (so it is already due): generous, for a loaded host.
 */
const OWN_DEADLINE_GRACE_MS = 5_000;

/**
 * The `ask_agent` ToolSet: `{ agent, message }` asks another agent over the bus
 * (request/reply on its chat subject) and returns its answer. The other agent's session is derived
 * from the caller's (`<callerAgent>-<callerSession>`), so a conversation between two agents keeps
 * its context from one question to the next. The request carries `depth` (the caller's + 1), and a
 * chat at `maxDepth` may not ask again, so agents asking each other cannot recurse without end.
 * It also carries `approvalRequired`, the tools needing approval in the caller's chain: the other
 * agent's calls to them need approval too. A protocol agent (`target`) cannot be held to that, so
 * a chat whose chain needs approval for any tool may not ask one.
 * A host that dies while answering is noticed within seconds (its session heartbeat stops) and
 * becomes a tool error the model sees.
 */
export function createAskAgentToolSet(options: AskAgentToolSetOptions): StatefulToolSet<undefined> {
  const { bus } = options;
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const maxDepth = options.maxDepth ?? DEFAULT_ASK_AGENT_MAX_DEPTH;
  const timeoutMs = options.timeoutMs ?? DEFAULT_ASK_AGENT_TIMEOUT_MS;
  const supervision = options.supervision ?? DEFAULT_SUPERVISION;
  const parentLeaseMs = options.parentLeaseMs ?? DEFAULT_PARENT_LEASE_MS;
  const peers = (options.peers ?? []).filter((peer) => peer !== options.agent);
  const known = peers.length > 0 ? ` Agents you can ask: ${peers.join(", ")}.` : "";

  const tool = defineTool({
    name: TOOL_NAME,
    // Another agent acts on the question (its own tools, its own history): never asked twice silently.
    idempotent: false,
    description: `Asks another agent a question and returns its answer. The other agent does not see this conversation: put everything it needs in the message.${known} To ask an agent outside this system (any agent on the NATS agent protocol, or any A2A agent by its Agent Card URL), give target instead of agent.`,
    parameters: AskAgentArguments,
    execute: async ({ agent, target, message }, context) => {
      const asked = resolveTarget(agent, target);
      const depth = context.depth ?? 0;
      if (depth >= maxDepth) {
        throw new AgentCallError(
          "depth_exceeded",
          `cannot ask ${describeTarget(asked)}: nested agent calls are capped at depth ${maxDepth} and this chat is at depth ${depth}`,
          { toolName: TOOL_NAME },
        );
      }
      const lineage = childLineage(context);
      const guarded = context.approvalRequired ?? [];
      if (asked.kind === "protocol") {
        if (guarded.length > 0) {
          // A protocol agent cannot be told to ask for approval: it could run them unasked.
          throw new AgentCallError(
            "denied",
            `cannot ask a protocol agent from this chat: its calls to ${guarded.join(", ")} need approval, and an agent outside this system cannot be made to ask for it`,
            { toolName: TOOL_NAME },
          );
        }
        return supervised(describeTarget(asked), context.signal, () =>
          whileWaiting(context, (leaseHeaders) =>
            askProtocolTarget(bus, asked.target, message, context.signal, {
              ...options.protocol,
              headers: { ...lineageHeaders(lineage, context.traceparent), ...leaseHeaders },
            }),
          ),
        );
      }
      if (asked.kind === "a2a") {
        if (guarded.length > 0) {
          // An A2A agent cannot be told to ask for approval either.
          throw new AgentCallError(
            "denied",
            `cannot ask an A2A agent from this chat: its calls to ${guarded.join(", ")} need approval, and an agent outside this system cannot be made to ask for it`,
            { toolName: TOOL_NAME },
          );
        }
        const contextId = askAgentSession(context.agent, context.session);
        return supervised(describeTarget(asked), context.signal, () =>
          askA2aTarget(asked.target, message, contextId, context.signal, options.a2a),
        );
      }
      const self = options.agent ?? context.agent;
      if (asked.agent === self) {
        throw new AgentCallError(
          "cycle",
          `an agent may not ask itself ("${asked.agent}"): answer directly instead`,
          {
            toolName: TOOL_NAME,
          },
        );
      }
      const session = askAgentSession(context.agent, context.session);
      if (isOnChain(lineage.chain, asked.agent, session)) {
        throw new AgentCallError(
          "cycle",
          `${asked.agent}/${session} is already waiting on this chain (${describeChain(lineage.chain)}): asking it would wait on itself`,
          { toolName: TOOL_NAME },
        );
      }
      const question: AgentQuestion = { agent: asked.agent, session, message, depth, guarded, lineage };
      return supervised(`${asked.agent}/${session}`, context.signal, () => askOnce(question, context));
    },
  });

  /**
   * One question asked under the agent's supervision policy, whichever way it reaches the agent
   * (by name, protocol target, A2A target): retried, made fatal to the asking chat, or reported.
   */
  async function supervised(asked: string, signal: AbortSignal, ask: () => Promise<string>): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await ask();
      } catch (error) {
        if (supervision.kind === "fail" && isWorthRetrying(error) && !signal.aborted) {
          throw failingTheChat(asked, error as AgentCallError);
        }
        const retry = supervision.kind === "retry" && attempt <= supervision.times && isWorthRetrying(error);
        if (!retry || signal.aborted) throw error;
        await sleep(supervision.backoffMs * 2 ** (attempt - 1), signal).catch(() => {});
      }
    }
  }

  /**
   * Runs one question with a lease the asked chat holds on this call: its headers go with the
   * question, and renewals go out while the question waits (see {@link renewParentLease}), so a
   * child whose parent's host died, with nobody to resume the parent, stops by itself.
   */
  async function whileWaiting<T>(
    context: ToolContext,
    ask: (leaseHeaders: Record<string, string>) => Promise<T>,
  ): Promise<T> {
    const { chatId, toolCallId } = context;
    if (chatId === undefined || chatId === "" || toolCallId === undefined) return ask({});
    const lease = {
      subject: parentWaitingSubject(prefix, context.agent, context.session),
      ttlMs: parentLeaseMs,
    };
    const stopRenewing = renewParentLease(bus, lease, { chatId, toolCallId });
    try {
      return await ask(parentLeaseHeaders(lease));
    } finally {
      stopRenewing();
    }
  }

  /** One question to an agent of this system, with its progress relayed and its stop cascaded. */
  async function askOnce(question: AgentQuestion, context: ToolContext): Promise<string> {
    const { agent, session, lineage } = question;
    const request = {
      session,
      text: question.message,
      // Kept in the body for hosts that predate the lineage header.
      depth: question.depth + 1,
      // What needs approval here needs it there too: asking another agent is no way round it.
      ...(question.guarded.length === 0 ? {} : { approvalRequired: question.guarded }),
    };
    const relay =
      context.progress === undefined || context.toolCallId === undefined
        ? undefined
        : relayChildProgress({
            bus,
            prefix,
            agent,
            session,
            parentChatId: lineage.parent.chatId,
            parentToolCallId: context.toolCallId,
            report: context.progress,
            ...(context.delegateApproval === undefined ? {} : { onApproval: context.delegateApproval }),
            ...(options.progressIntervalMs === undefined ? {} : { intervalMs: options.progressIntervalMs }),
          });
    // Stopping this call stops the chat it asked, on whichever host runs it, and that one's in turn.
    const stopChild = (): void => stopAskedChat({ agent, session });
    context.signal.addEventListener("abort", stopChild, { once: true });
    let reply: BusMessage;
    try {
      // Journaled before the question goes out: should this host die while the call waits, the
      // chat resumed elsewhere stops the one asked here (nobody would wait for its answer).
      if (context.toolCallId !== undefined)
        await context.noteAskedChat?.(context.toolCallId, { agent, session });
      await relay?.ready;
      reply = await whileWaiting(context, (leaseHeaders) =>
        requestWithHeartbeat(bus, chatSubject(prefix, agent), JSON.stringify(request), {
          heartbeatSubject: sessionHeartbeatSubject(prefix, agent, session),
          timeoutMs,
          signal: context.signal,
          headers: { ...lineageHeaders(lineage, context.traceparent), ...leaseHeaders },
          ...(options.heartbeatTimeoutMs === undefined
            ? {}
            : { heartbeatTimeoutMs: options.heartbeatTimeoutMs }),
        }),
      );
    } catch (error) {
      throw requestError(agent, error, context.signal, timeoutMs);
    } finally {
      context.signal.removeEventListener("abort", stopChild);
      relay?.close();
    }
    const parsed = parseChatReply(reply.data);
    if (!parsed.ok) {
      throw new AgentCallError(
        "agent_failed",
        `agent "${agent}" sent an unreadable reply (${parsed.error.message})`,
        {
          toolName: TOOL_NAME,
        },
      );
    }
    if (!parsed.value.ok) {
      if (lineage.deadline !== undefined && Date.now() >= lineage.deadline) {
        // The asked chat failed past the deadline it was handed, which is this chat's own: this chat
        // is out of time too. Its own stop is due on this host any moment; the model is not handed
        // an answer it has no time left to use (a parent's deadline bounds the whole tree, never
        // just the children). A chat whose deadline nobody enforces goes on after the grace.
        await sleep(OWN_DEADLINE_GRACE_MS, context.signal).catch(() => {});
        if (context.signal.aborted) throw new ToolCancelledError(TOOL_NAME);
      }
      const { code, message: reason } = parsed.value.error;
      throw new AgentCallError(
        callErrorCodeOf(code),
        `agent "${agent}" could not answer (${code}): ${reason}`,
        {
          toolName: TOOL_NAME,
        },
      );
    }
    return parsed.value.result;
  }

  /** Sends the asked chat's session a `stop` on its agent's control subject (nobody waits on it). */
  function stopAskedChat({ agent, session }: AskedChatRef): void {
    const stop = JSON.stringify({ session, command: "stop" });
    bus.request(controlSubject(prefix, agent), stop, { timeoutMs: STOP_TIMEOUT_MS }).catch(() => {});
  }

  // The set is stateless, so `copy()` hands out this very object, the stop included.
  return Object.assign(createToolSet({ name: TOOL_NAME, tools: [tool] }), { stopAskedChat });
}

/** What `ask_agent` was asked to reach: one kind per way of reaching an agent. */
type AskedTarget =
  | { kind: "agent"; agent: string }
  | { kind: "protocol"; target: ProtocolTarget }
  | { kind: "a2a"; target: A2aTarget };

/** A question to an agent of this system, ready to send. */
interface AgentQuestion {
  agent: string;
  session: string;
  message: string;
  /** The asking chat's depth. */
  depth: number;
  guarded: readonly string[];
  lineage: ChatLineage;
}

function resolveTarget(
  agent: string | undefined,
  target: ProtocolTarget | A2aTarget | undefined,
): AskedTarget {
  if (agent !== undefined && target !== undefined) {
    throw new ToolError(
      "give either agent (an agent of this system) or target (a protocol agent), not both",
      {
        toolName: TOOL_NAME,
      },
    );
  }
  if (target !== undefined) return "a2a" in target ? { kind: "a2a", target } : { kind: "protocol", target };
  if (agent === undefined) {
    throw new ToolError("give agent (an agent of this system) or target (a protocol agent)", {
      toolName: TOOL_NAME,
    });
  }
  return { kind: "agent", agent };
}

function describeTarget(asked: AskedTarget): string {
  if (asked.kind === "agent") return `"${asked.agent}"`;
  if (asked.kind === "a2a") return `the A2A agent at ${asked.target.a2a}`;
  const known = Object.entries(asked.target).map(([key, value]) => `${key} ${value}`);
  return known.length === 0 ? "a protocol agent" : `the protocol agent (${known.join(", ")})`;
}

/**
 * The lineage a chat asked by this call gets: one deeper, the asking session added to the chain,
 * this chat and call as its parent, and the root (this chat, when nobody asked it) and deadline
 * handed down.
 */
export function childLineage(context: ToolContext): ChatLineage {
  const chatId = context.chatId || "unknown";
  const own = { agent: context.agent, session: context.session, chatId };
  const above = context.lineage;
  const deadline = context.deadline ?? above?.deadline;
  return {
    depth: (context.depth ?? 0) + 1,
    chain: [...(above?.chain ?? []), { agent: context.agent, session: context.session }],
    parent: { ...own, ...(context.toolCallId === undefined ? {} : { toolCallId: context.toolCallId }) },
    root: above?.root ?? own,
    ...(deadline === undefined ? {} : { deadline }),
  };
}

/** The typed tool error for an asked agent's failed reply. */
function callErrorCodeOf(code: string): AgentCallErrorCode {
  switch (code) {
    case "cycle":
      return "cycle";
    case "forbidden":
      return "denied";
    case "unknown_agent":
    case "overloaded":
    case "queue_overflow":
      return "unavailable";
    default:
      return "agent_failed";
  }
}

/** A retry may help an agent that was not there or failed; never a cycle, the depth cap or a refusal. */
function isWorthRetrying(error: unknown): boolean {
  return error instanceof AgentCallError && (error.code === "unavailable" || error.code === "agent_failed");
}

/** The asked agent's failure, made the asking chat's own (the `fail` supervision policy). */
function failingTheChat(asked: string, error: AgentCallError): AgentCallError {
  return new AgentCallError(
    "agent_failed",
    `the asked agent ${asked} failed (${error.code}: ${error.message}), and this agent's onChildFailure policy is "fail"`,
    { toolName: TOOL_NAME, cause: error, failsChat: true },
  );
}

/**
 * The session an agent's questions go to: `<callerAgent>-<callerSession>`, shortened with a hash
 * when that would break the 64-character name limit (two callers never share a session).
 */
export function askAgentSession(callerAgent: string, callerSession: string): string {
  const name = `${callerAgent}-${callerSession}`;
  if (name.length <= 64) return name;
  const hash = createHash("sha256").update(name).digest("hex").slice(0, 12);
  return `${name.slice(0, 64 - hash.length - 1)}-${hash}`;
}

function requestError(agent: string, error: unknown, signal: AbortSignal, timeoutMs: number): Error {
  if (signal.aborted) return new ToolCancelledError(TOOL_NAME);
  if (error instanceof BusTimeoutError) {
    const limit = timeoutMs < 1_000 ? `${timeoutMs} ms` : `${Math.round(timeoutMs / 1000)} s`;
    return new AgentCallError("unavailable", `agent "${agent}" did not answer within ${limit}`, {
      toolName: TOOL_NAME,
      cause: error,
    });
  }
  if (error instanceof NoRespondersError) {
    return new AgentCallError("unavailable", `no host serves agent "${agent}"`, {
      toolName: TOOL_NAME,
      cause: error,
    });
  }
  if (error instanceof HostSilentError) {
    return new AgentCallError(
      "unavailable",

      `the host of agent "${agent}" stopped responding (no heartbeat for ${error.silentFor}); it may have crashed`,
      { toolName: TOOL_NAME, cause: error },
    );
  }
  const reason = describeError(error);
  return new ToolError(`asking agent "${agent}" failed: ${reason}`, { toolName: TOOL_NAME, cause: error });
}
