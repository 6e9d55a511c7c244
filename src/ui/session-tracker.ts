import type { AgentEvent } from "../events/types.js";
import type { TokenUsage } from "../llm/types.js";
import { summarizeStates } from "./public/state-values.js";

/** Where a session stands, as far as its events tell. */
export type SessionStatus = "idle" | "running" | "completed" | "failed" | "cancelled";

/** One row of `/api/sessions`. */
export interface SessionSummary {
  agent: string;
  session: string;
  status: SessionStatus;
  /** Where the session is, formatted: `chat: iterating.toolTurn · iteration: streaming`. */
  state: string;
  /** The last state value seen per machine (`chat`, `iteration`, `session`, `compaction`). */
  states: Record<string, unknown>;
  /** Timestamp (ISO 8601) of the latest event. */
  lastActivity: string;
  lastKind: string;
  lastSeq: number;
  /** Chats started while the server watched. */
  chats: number;
  /** Usage of the last completed chat. */
  usage?: TokenUsage;
  /** The host of the latest event that named one: the session's owner as far as events tell. */
  host?: string;
  /** Tool calls of its open chat that wait for a person's decision (approve / deny). */
  waitingApprovals: number;
  /**
   * False for a session known only from the event log (the UI did not see it live): its status,
   * state and activity are then unknown until it is opened or moves.
   */
  seenLive: boolean;
}

export interface SessionTrackerOptions {
  /** Events kept per session for replay (text deltas are merged, so this goes a long way). */
  historyLimit?: number;
  /** Sessions remembered; the least recently active are forgotten first. */
  sessionLimit?: number;
}

interface Entry {
  summary: SessionSummary;
  events: AgentEvent[];
  /** Calls asked about and not yet decided, in the open chat. */
  awaiting: Set<string>;
}

/**
 * The UI server's memory of what it saw on the bus: a summary per session and a bounded buffer of
 * its recent events (for replay when there is no JetStream log). Consecutive text or reasoning
 * deltas of one stream are merged into one event as they are stored: the page renders the same
 * text, and a long answer does not push the start of the chat out of the buffer.
 */
export class SessionTracker {
  private readonly entries = new Map<string, Entry>();
  private readonly historyLimit: number;
  private readonly sessionLimit: number;

  constructor(options: SessionTrackerOptions = {}) {
    this.historyLimit = options.historyLimit ?? 2_000;
    this.sessionLimit = options.sessionLimit ?? 500;
  }

  record(event: AgentEvent): SessionSummary {
    const key = sessionKey(event.agent, event.session);
    let entry = this.entries.get(key);
    if (entry === undefined) {
      entry = {
        summary: {
          agent: event.agent,
          session: event.session,
          status: "idle",
          state: "",
          states: {},
          lastActivity: event.ts,
          lastKind: event.kind,
          lastSeq: event.seq,
          chats: 0,
          waitingApprovals: 0,
          seenLive: true,
        },
        events: [],
        awaiting: new Set(),
      };
      this.entries.set(key, entry);
      this.evict();
    } else {
      // Re-insert so that Map order is least-recently-active first (for eviction).
      this.entries.delete(key);
      this.entries.set(key, entry);
    }
    update(entry.summary, event);
    trackApprovals(entry, event);
    store(entry.events, event, this.historyLimit);
    return entry.summary;
  }

  /** Every known session, most recently active first. */
  list(): SessionSummary[] {
    return [...this.entries.values()].map((entry) => entry.summary).reverse();
  }

  get(agent: string, session: string): SessionSummary | undefined {
    return this.entries.get(sessionKey(agent, session))?.summary;
  }

  /** The buffered events of one session, oldest first (a copy). */
  events(agent: string, session: string): AgentEvent[] {
    return [...(this.entries.get(sessionKey(agent, session))?.events ?? [])];
  }

  private evict(): void {
    while (this.entries.size > this.sessionLimit) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) return;
      this.entries.delete(oldest);
    }
  }
}

function sessionKey(agent: string, session: string): string {
  return `${agent}/${session}`;
}

function update(summary: SessionSummary, event: AgentEvent): void {
  summary.lastActivity = event.ts;
  summary.lastKind = event.kind;
  summary.lastSeq = event.seq;
  if (event.host !== undefined) summary.host = event.host;
  switch (event.kind) {
    case "ChatStarted":
      summary.status = "running";
      summary.chats++;
      break;
    case "ChatCompleted":
      summary.status = "completed";
      summary.usage = event.usage;
      break;
    case "ChatFailed":
      summary.status = event.cancelled ? "cancelled" : "failed";
      break;
    case "StateChanged":
      summary.states[event.machine] = event.state;
      summary.state = summarizeStates(summary.states);
      break;
    default:
      break;
  }
}

function trackApprovals(entry: Entry, event: AgentEvent): void {
  if (event.kind === "ToolApprovalRequested") entry.awaiting.add(event.toolCallId);
  else if (event.kind === "ToolApprovalResolved") entry.awaiting.delete(event.toolCallId);
  else if (event.kind === "ChatCompleted" || event.kind === "ChatFailed" || event.kind === "ChatStarted") {
    entry.awaiting.clear();
  } else return;
  entry.summary.waitingApprovals = entry.awaiting.size;
}

function store(events: AgentEvent[], event: AgentEvent, limit: number): void {
  const last = events[events.length - 1];
  const merged = last === undefined ? undefined : mergeDeltas(last, event);
  if (merged !== undefined) {
    events[events.length - 1] = merged;
    return;
  }
  events.push(event);
  if (events.length > limit) events.splice(0, events.length - limit);
}

/** One event for two consecutive deltas of the same kind, chat and iteration; else undefined. */
function mergeDeltas(last: AgentEvent, event: AgentEvent): AgentEvent | undefined {
  if (last.chatId !== event.chatId || last.iteration !== event.iteration || last.seq + 1 !== event.seq) {
    return undefined;
  }
  if (
    (last.kind === "ModelTextDelta" && event.kind === "ModelTextDelta") ||
    (last.kind === "ModelReasoningDelta" && event.kind === "ModelReasoningDelta")
  ) {
    return { ...last, delta: last.delta + event.delta, seq: event.seq, ts: event.ts };
  }
  return undefined;
}
