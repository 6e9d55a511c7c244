import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { eventStreamName, replayEvents } from "../bus/event-log.js";
import { isValidName, sessionEventsPattern } from "../bus/subjects.js";

/** A session the event log knows: whether or not this UI saw it live. */
export interface LoggedSession {
  agent: string;
  session: string;
  /** Chats the log holds for it (within the log's retention). */
  chats: number;
  /** Tool calls of its open chat that wait for a decision now (0: none). */
  waitingApprovals: number;
}

export interface ListLoggedSessionsOptions {
  prefix: string;
  /** Sessions listed at most (the most recently started first would need a read per session). */
  limit?: number;
  /** Sessions that once asked for approval checked at most for one that waits now. */
  approvalChecks?: number;
  signal?: AbortSignal;
}

/**
 * Every session the JetStream event log holds, read from the stream's subjects at one moment
 * (`<prefix>.events.<agent>.<session>.ChatStarted`, with its count): a UI started after a chat,
 * or one that was not watching, lists it too. A session that ever asked for approval is looked at
 * more closely: its latest event of each kind tells whether its last chat is still open after the
 * request, and then that chat's events tell which calls are still undecided. Needs only what an
 * observer may do on the event stream (stream info, ordered consumers).
 */
export async function listLoggedSessions(
  connection: NatsConnection,
  options: ListLoggedSessionsOptions,
): Promise<LoggedSession[]> {
  const { prefix } = options;
  // No `$JS.API.INFO` probe: an observer's NATS user may not have it (it needs only the stream's info).
  const jsm = await jetstreamManager(connection, { checkAPI: false });
  const stream = eventStreamName(prefix);
  const countsOf = async (kind: string): Promise<Map<string, number>> => {
    const info = await jsm.streams.info(stream, { subjects_filter: `${prefix}.events.*.*.${kind}` });
    const counts = new Map<string, number>();
    for (const [subject, count] of Object.entries(info.state.subjects ?? {})) {
      const parts = subject.slice(prefix.length + ".events.".length).split(".");
      if (parts.length !== 3 || !isValidName(parts[0] ?? "") || !isValidName(parts[1] ?? "")) continue;
      counts.set(`${parts[0]}/${parts[1]}`, count);
    }
    return counts;
  };
  const started = await countsOf("ChatStarted");
  const asked = await countsOf("ToolApprovalRequested");
  const keys = [...started.keys()].sort().slice(0, options.limit ?? 5_000);
  const waiting = new Map<string, number>();
  for (const key of [...asked.keys()].slice(0, options.approvalChecks ?? 200)) {
    const [agent = "", session = ""] = key.split("/");
    const count = await countWaitingApprovals(connection, prefix, agent, session, options.signal);
    if (count > 0) waiting.set(key, count);
  }
  return keys.map((key) => {
    const [agent = "", session = ""] = key.split("/");
    return { agent, session, chats: started.get(key) ?? 0, waitingApprovals: waiting.get(key) ?? 0 };
  });
}

/** Tool calls of the session's open chat still waiting for approval, from the event log. */
async function countWaitingApprovals(
  connection: NatsConnection,
  prefix: string,
  agent: string,
  session: string,
  signal: AbortSignal | undefined,
): Promise<number> {
  const filter = sessionEventsPattern(prefix, agent, session);
  const lastSeq = new Map<string, number>();
  for await (const stored of replayEvents(connection, {
    prefix,
    filter,
    since: { lastPerSubject: true },
    ...(signal === undefined ? {} : { signal }),
  })) {
    lastSeq.set(stored.event.kind, stored.seq);
  }
  const requested = lastSeq.get("ToolApprovalRequested") ?? 0;
  const ended = Math.max(lastSeq.get("ChatCompleted") ?? 0, lastSeq.get("ChatFailed") ?? 0);
  if (requested <= ended) return 0;
  // The open chat began after the last ended one: its requests minus its decisions.
  const open = new Set<string>();
  for await (const stored of replayEvents(connection, {
    prefix,
    filter,
    since: { seq: ended + 1 },
    ...(signal === undefined ? {} : { signal }),
  })) {
    if (!stored.isKnownKind) continue;
    const { event } = stored;
    if (event.kind === "ToolApprovalRequested") open.add(event.toolCallId);
    else if (event.kind === "ToolApprovalResolved") open.delete(event.toolCallId);
  }
  return open.size;
}
