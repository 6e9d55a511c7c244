import { createHash } from "node:crypto";
import { z } from "zod";
import type { Bus, BusMessage } from "../bus/bus.js";
import { BusTimeoutError, NoRespondersError } from "../bus/bus-errors.js";
import { parseChatReply } from "../bus/contract.js";
import { HostSilentError, requestWithHeartbeat } from "../bus/request-with-heartbeat.js";
import { chatSubject, DEFAULT_PREFIX, NAME_PATTERN, sessionHeartbeatSubject } from "../bus/subjects.js";
import { describeError } from "../errors/describe-error.js";
import { type A2aCallSettings, A2aTarget, askA2aTarget } from "./ask-a2a-agent.js";
import { askProtocolTarget, type ProtocolCallSettings, ProtocolTarget } from "./ask-protocol-agent.js";
import { createToolSet, type StatefulToolSet } from "./create-tool-set.js";
import { defineTool } from "./define-tool.js";
import { ToolCancelledError, ToolError } from "./tool-errors.js";

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
  /** How `target: { a2a }` calls reach A2A agents. */
  a2a?: A2aCallSettings;
}

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
  const peers = (options.peers ?? []).filter((peer) => peer !== options.agent);
  const known = peers.length > 0 ? ` Agents you can ask: ${peers.join(", ")}.` : "";

  const tool = defineTool({
    name: TOOL_NAME,
    // Another agent acts on the question (its own tools, its own history): never asked twice silently.
    idempotent: false,
    description: `Asks another agent a question and returns its answer. The other agent does not see this conversation: put everything it needs in the message.${known} To ask an agent outside this system (any agent on the NATS agent protocol, or any A2A agent by its Agent Card URL), give target instead of agent.`,
    parameters: AskAgentArguments,
    execute: async ({ agent, target, message }, context) => {
      if (agent !== undefined && target !== undefined) {
        throw new ToolError(
          "give either agent (an agent of this system) or target (a protocol agent), not both",
          {
            toolName: TOOL_NAME,
          },
        );
      }
      if (target !== undefined) {
        const depth = context.depth ?? 0;
        if (depth >= maxDepth) {
          throw new ToolError(
            `cannot ask a protocol agent: nested agent calls are capped at depth ${maxDepth} and this chat is at depth ${depth}`,
            { toolName: TOOL_NAME },
          );
        }
        const guarded = context.approvalRequired ?? [];
        if (guarded.length > 0) {
          // A protocol agent cannot be told to ask for approval: it could run them unasked.
          throw new ToolError(
            `cannot ask a protocol agent from this chat: its calls to ${guarded.join(", ")} need approval, and an agent outside this system cannot be made to ask for it`,
            { toolName: TOOL_NAME },
          );
        }
        if ("a2a" in target) {
          const contextId = askAgentSession(context.agent, context.session);
          return askA2aTarget(target, message, contextId, context.signal, options.a2a);
        }
        return askProtocolTarget(bus, target, message, context.signal, options.protocol);
      }
      if (agent === undefined) {
        throw new ToolError("give agent (an agent of this system) or target (a protocol agent)", {
          toolName: TOOL_NAME,
        });
      }
      const self = options.agent ?? context.agent;
      if (agent === self) {
        throw new ToolError(`an agent may not ask itself ("${agent}"): answer directly instead`, {
          toolName: TOOL_NAME,
        });
      }
      const depth = context.depth ?? 0;
      if (depth >= maxDepth) {
        throw new ToolError(
          `cannot ask "${agent}": nested agent calls are capped at depth ${maxDepth} and this chat is at depth ${depth}`,
          { toolName: TOOL_NAME },
        );
      }
      const guarded = context.approvalRequired ?? [];
      const request = {
        session: askAgentSession(context.agent, context.session),
        text: message,
        depth: depth + 1,
        // What needs approval here needs it there too: asking another agent is no way round it.
        ...(guarded.length === 0 ? {} : { approvalRequired: guarded }),
      };
      let reply: BusMessage;
      try {
        reply = await requestWithHeartbeat(bus, chatSubject(prefix, agent), JSON.stringify(request), {
          heartbeatSubject: sessionHeartbeatSubject(prefix, agent, request.session),
          timeoutMs,
          signal: context.signal,
          ...(options.heartbeatTimeoutMs === undefined
            ? {}
            : { heartbeatTimeoutMs: options.heartbeatTimeoutMs }),
        });
      } catch (error) {
        throw requestError(agent, error, context.signal, timeoutMs);
      }
      const parsed = parseChatReply(reply.data);
      if (!parsed.ok) {
        throw new ToolError(`agent "${agent}" sent an unreadable reply (${parsed.error.message})`, {
          toolName: TOOL_NAME,
        });
      }
      if (!parsed.value.ok) {
        const { code, message: reason } = parsed.value.error;
        throw new ToolError(`agent "${agent}" could not answer (${code}): ${reason}`, {
          toolName: TOOL_NAME,
        });
      }
      return parsed.value.result;
    },
  });

  return createToolSet({ name: TOOL_NAME, tools: [tool] });
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
    return new ToolError(`agent "${agent}" did not answer within ${limit}`, {
      toolName: TOOL_NAME,
      cause: error,
    });
  }
  if (error instanceof NoRespondersError) {
    return new ToolError(`no host serves agent "${agent}"`, { toolName: TOOL_NAME, cause: error });
  }
  if (error instanceof HostSilentError) {
    return new ToolError(
      `the host of agent "${agent}" stopped responding (no heartbeat for ${error.silentFor}); it may have crashed`,
      { toolName: TOOL_NAME, cause: error },
    );
  }
  const reason = describeError(error);
  return new ToolError(`asking agent "${agent}" failed: ${reason}`, { toolName: TOOL_NAME, cause: error });
}
