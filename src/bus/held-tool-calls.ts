import type { NatsConnection } from "@nats-io/transport-node";
import type { EventKind } from "../events/types.js";
import { replayEvents } from "./event-log.js";
import { DEFAULT_PREFIX } from "./subjects.js";

/** One tool call that waits for an approver's decision, as the event log tells it. */
export interface HeldToolCallListing {
  agent: string;
  session: string;
  /** The chat the call belongs to (its events go on under this id once it is decided). */
  chatId: string;
  toolCallId: string;
  toolName: string;
  /** The exact arguments the decision binds to (JSON text, as the model sent them). */
  arguments: string;
  /** The host that ran the session when the call was held (absent from older hosts' events). */
  host?: string;
  /** When the call was held (the event's ISO 8601 timestamp). */
  requestedAt: string;
  /**
   * A call of a chat another agent asked (`ask_agent`): the chat at the top of that tree, where
   * the call is also listed (its copy) and may be decided all the same.
   */
  root?: { agent: string; session: string; chatId: string };
  /** The copy on the root's session of a call held further down the tree: the session holding it. */
  heldBy?: { agent: string; session: string; chatId: string };
}

export interface ListHeldToolCallsOptions {
  prefix?: string;
  /** Only this agent's calls (default: every agent's). */
  agent?: string;
  /** Only this session's calls (default: every session's). */
  session?: string;
  signal?: AbortSignal;
}

/** The kinds that end a held call: its decision, or the end of its chat (stopped, failed, host gone). */
const SETTLING_KINDS: readonly EventKind[] = ["ToolApprovalResolved", "ChatCompleted", "ChatFailed"];

/**
 * Every tool call waiting for approval on the NATS system, read from the event log (the JetStream
 * stream over `<prefix>.events.>`), oldest first. The log is the one place every host writes to,
 * so this finds calls whose requester left, whose host stopped (the approval is parked with the
 * session and the next owner takes the decision), and calls of any host, without asking the hosts.
 *
 * A call is held from its `ToolApprovalRequested` until a `ToolApprovalResolved` of the same chat
 * and call id, or until its chat ends (`ChatCompleted` / `ChatFailed`: a stopped chat cancels its
 * approvals). nats-server 2.9 allows one filter per consumer, so each kind is replayed on its own
 * subject (`<prefix>.events.<agent>.<session>.<Kind>`), which reads only those records.
 *
 * @throws BusError when the event log does not exist (no host has created it yet).
 */
export async function listHeldToolCalls(
  connection: NatsConnection,
  options: ListHeldToolCallsOptions = {},
): Promise<HeldToolCallListing[]> {
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const filterOf = (kind: EventKind) =>
    `${prefix}.events.${options.agent ?? "*"}.${options.session ?? "*"}.${kind}`;
  const replay = (kind: EventKind) =>
    replayEvents(connection, {
      prefix,
      filter: filterOf(kind),
      since: { seq: 1 },
      ...(options.signal === undefined ? {} : { signal: options.signal }),
    });

  // Requests first: a settling event stored after this read was of a request read here or later.
  const held = new Map<string, HeldToolCallListing>();
  for await (const stored of replay("ToolApprovalRequested")) {
    if (!stored.isKnownKind || stored.event.kind !== "ToolApprovalRequested") continue;
    const event = stored.event;
    held.set(callKey(event.agent, event.session, event.chatId, event.toolCallId), {
      agent: event.agent,
      session: event.session,
      chatId: event.chatId,
      toolCallId: event.toolCallId,
      toolName: event.toolName,
      arguments: event.arguments,
      ...(event.host === undefined ? {} : { host: event.host }),
      requestedAt: event.ts,
      ...(event.root === undefined
        ? {}
        : { root: { agent: event.root.agent, session: event.root.session, chatId: event.root.chatId } }),
      ...(event.heldBy === undefined ? {} : { heldBy: event.heldBy }),
    });
  }
  if (held.size === 0) return [];

  const endedChats = new Set<string>();
  for (const kind of SETTLING_KINDS) {
    for await (const stored of replay(kind)) {
      if (!stored.isKnownKind) continue;
      const event = stored.event;
      if (event.kind === "ToolApprovalResolved") {
        held.delete(callKey(event.agent, event.session, event.chatId, event.toolCallId));
      } else {
        endedChats.add(chatKey(event.agent, event.session, event.chatId));
      }
    }
  }
  return [...held.values()].filter((call) => !endedChats.has(chatKey(call.agent, call.session, call.chatId)));
}

function chatKey(agent: string, session: string, chatId: string): string {
  return JSON.stringify([agent, session, chatId]);
}

function callKey(agent: string, session: string, chatId: string, toolCallId: string): string {
  return JSON.stringify([agent, session, chatId, toolCallId]);
}
