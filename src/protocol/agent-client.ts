import {
  headers as createNatsHeaders,
  type Msg,
  type NatsConnection,
  type Subscription,
} from "@nats-io/transport-node";
import { createConnectionInbox } from "../bus/connection-inbox.js";
import { isValidSubject } from "../bus/subjects.js";
import { AgentloopError } from "../errors/agentloop-error.js";
import { sliceCodePoints } from "../text/truncate-text.js";
import {
  type AgentTarget,
  type DiscoverAgentsOptions,
  type DiscoveredAgent,
  describeAgent,
  discoverAgents,
  matchesTarget,
} from "./discovery.js";
import { type HeartbeatWatch, watchHeartbeats } from "./heartbeat-watch.js";
import { parseProtocolSubject, protocolSubjectOf } from "./protocol-subjects.js";
import { DEFAULT_INACTIVITY_MS, isNoResponders, parseReplyChunk, type ReplyChunk } from "./wire.js";

/**
 * The caller side of the Synadia Agent Protocol (v0.3): prompt one agent and read its streamed
 * reply, or find an agent by discovery and collect its whole answer as text.
 */

/**
 * What a caller without a human answers to an agent's mid-stream question (§7): an agent asking
 * through `ask_agent` cannot consult anyone, so the other agent is told to go on without.
 */
export const QUERY_REFUSAL =
  "No one can answer questions here: you were called by another agent, which has no human to ask. " +
  "Continue with your best judgement and state the assumptions you made.";

/** Base of the protocol client's errors; `name` is the concrete class name. */
export class AgentProtocolError extends AgentloopError {
  readonly code: "agent_protocol" = "agent_protocol";
  readonly retryable: boolean = false;
}

/** No discovered agent matches the target. */
export class AgentNotFoundError extends AgentProtocolError {
  readonly available: readonly string[];

  constructor(target: AgentTarget, available: readonly string[]) {
    const listing =
      available.length === 0 ? "no protocol agent answered discovery" : `found: ${available.join(", ")}`;
    super(`no protocol agent matches ${describeTarget(target)} (${listing})`);
    this.available = available;
  }
}

/** Several different agents match the target: the caller must narrow it. */
export class AmbiguousTargetError extends AgentProtocolError {
  readonly candidates: readonly string[];

  constructor(target: AgentTarget, candidates: readonly string[]) {
    super(
      `${describeTarget(target)} matches ${candidates.length} agents (${candidates.join(", ")}): give owner and/or name too`,
    );
    this.candidates = candidates;
  }
}

/** The agent answered with an error reply (`Nats-Service-Error-Code`, §9). */
export class AgentServiceError extends AgentProtocolError {
  readonly description: string;
  /** The error body's own code, when it has one (an agentloop host's, e.g. `cycle`). */
  readonly reason: string | undefined;

  /** @param status The agent's `Nats-Service-Error-Code` (read it back as `status`). */
  constructor(status: number, description: string, reason?: string) {
    super(`the agent answered with error ${status}: ${description}`, { status });
    this.description = description;
    this.reason = reason;
  }
}

/** Nobody listens on the prompt subject any more (the instance went away after discovery). */
export class AgentNoRespondersError extends AgentProtocolError {
  constructor(subject: string) {
    super(`no agent listens on ${subject}`);
  }
}

/** The agent's heartbeats stopped mid-stream (none for 3 × its interval): it is gone. */
export class AgentOfflineError extends AgentProtocolError {
  constructor(subject: string, silentMs: number) {
    super(`the agent went offline: no heartbeat on ${subject} for ${formatDuration(silentMs)}`);
  }
}

/** The stream stayed silent longer than the inactivity limit. */
export class AgentStreamTimeoutError extends AgentProtocolError {
  readonly inactivityMs: number;

  constructor(inactivityMs: number) {
    super(`the agent sent nothing for ${formatDuration(inactivityMs)}`);
    this.inactivityMs = inactivityMs;
  }
}

/** The shortest silence that counts an agent offline, whatever interval it announces. */
const MIN_OFFLINE_MS = 1_000;

export interface PromptAgentOptions {
  /** Aborting unsubscribes (the protocol has no cancel message) and rejects with the reason. */
  signal?: AbortSignal;
  /** Fails the stream after this long without any chunk (default 60 s). */
  inactivityMs?: number;
  /**
   * The agent's heartbeat subject: once a heartbeat came, the stream fails when none follows
   * within 3 × its `interval_s` (an agent that died mid-answer is noticed before the inactivity
   * limit). Instances sharing the subject (one queue group) keep each other alive here; the
   * inactivity limit still catches one of them dying. Default: none.
   */
  heartbeatSubject?: string;
  /**
   * Headers sent with the prompt: an agentloop caller sends its lineage (depth, the chain of
   * sessions waiting on the answer) and `traceparent`, so an agentloop host refuses a cycle at once
   * and the asked chat joins the trace. Other agents ignore them.
   */
  headers?: Record<string, string>;
}

/**
 * Publishes `prompt` (plain text) to an agent's prompt subject with a fresh reply inbox and yields
 * the reply's chunks as they come: `status` (the ack, keep-alives), `response` and `query` (answer
 * it by publishing to `replySubject`). Unknown chunks are skipped; the terminator ends the
 * iteration. Any chunk resets the inactivity timer.
 *
 * @throws AgentServiceError on an error reply, AgentNoRespondersError when nobody listens,
 *   AgentStreamTimeoutError after `inactivityMs` of silence, AgentOfflineError when the agent's
 *   heartbeats stop (with `heartbeatSubject`), the signal's reason when aborted.
 */
export async function* promptAgent(
  connection: NatsConnection,
  subject: string,
  prompt: string,
  options: PromptAgentOptions = {},
): AsyncGenerator<Exclude<ReplyChunk, { type: "end" | "error" | "ignored" }>> {
  const { signal } = options;
  const inactivityMs = options.inactivityMs ?? DEFAULT_INACTIVITY_MS;
  if (!isValidSubject(subject))
    throw new AgentProtocolError(`invalid prompt subject ${JSON.stringify(subject)}`);
  if (prompt === "") throw new AgentProtocolError("an empty prompt is a client error");
  signal?.throwIfAborted();

  const pending: (ReplyChunk | { type: "failed"; error: unknown })[] = [];
  let wake: (() => void) | undefined;
  const push = (item: ReplyChunk | { type: "failed"; error: unknown }): void => {
    pending.push(item);
    wake?.();
  };
  let timer: NodeJS.Timeout | undefined;
  const armTimer = (): void => {
    clearTimeout(timer);
    timer = setTimeout(
      () => push({ type: "failed", error: new AgentStreamTimeoutError(inactivityMs) }),
      inactivityMs,
    );
  };
  const onAbort = (): void => push({ type: "failed", error: signal?.reason });
  // Once the agent has sent a heartbeat, it may stay silent 3 × its interval before it counts as gone.
  let offlineTimer: NodeJS.Timeout | undefined;
  const { heartbeatSubject } = options;
  let heartbeats: HeartbeatWatch | undefined;
  let subscription: Subscription | undefined;
  try {
    if (heartbeatSubject !== undefined) {
      heartbeats = watchHeartbeats(connection, {
        subject: heartbeatSubject,
        onSighting: ({ heartbeat }) => {
          // A sender announcing an absurdly short interval does not get the stream failed at once.
          const silentMs = Math.max(MIN_OFFLINE_MS, 3 * heartbeat.interval_s * 1000);
          clearTimeout(offlineTimer);
          offlineTimer = setTimeout(
            () => push({ type: "failed", error: new AgentOfflineError(heartbeatSubject, silentMs) }),
            silentMs,
          );
        },
      });
    }
    const inbox = createConnectionInbox(connection);
    subscription = connection.subscribe(inbox, {
      callback: (error, message) => {
        if (error !== null) return push({ type: "failed", error });
        if (isNoResponders(message))
          return push({ type: "failed", error: new AgentNoRespondersError(subject) });
        armTimer();
        push(parseReplyChunk(message.string(), headersOf(message)));
      },
    });
    signal?.addEventListener("abort", onAbort, { once: true });
    armTimer();
    const { headers } = options;
    if (headers === undefined || Object.keys(headers).length === 0) {
      connection.publish(subject, prompt, { reply: inbox });
    } else {
      const natsHeaders = createNatsHeaders();
      for (const [key, value] of Object.entries(headers)) natsHeaders.set(key, value);
      connection.publish(subject, prompt, { reply: inbox, headers: natsHeaders });
    }
    while (true) {
      const item = pending.shift();
      if (item === undefined) {
        await new Promise<void>((resolve) => {
          wake = resolve;
        });
        wake = undefined;
        continue;
      }
      if (item.type === "failed") throw item.error;
      if (item.type === "end") return;
      if (item.type === "error") throw new AgentServiceError(item.code, item.description, item.reason);
      if (item.type === "ignored") continue;
      yield item;
    }
  } finally {
    clearTimeout(timer);
    clearTimeout(offlineTimer);
    heartbeats?.stop();
    signal?.removeEventListener("abort", onAbort);
    try {
      subscription?.unsubscribe();
    } catch {
      // Already gone with the connection.
    }
  }
}

export interface AskProtocolAgentOptions extends PromptAgentOptions {
  target: AgentTarget;
  message: string;
  /** How discovery collects replies. */
  discovery?: Omit<DiscoverAgentsOptions, "signal">;
  /** The answer is cut to this many characters, with a marker (default: no cut). */
  maxChars?: number;
  /** What queries are answered with (default {@link QUERY_REFUSAL}). */
  queryAnswer?: string;
}

/** An agent's whole answer. */
export interface ProtocolAnswer {
  /** The `response` chunks joined (cut to `maxChars` with a marker when longer). */
  text: string;
  /** Who answered. */
  agent: DiscoveredAgent;
  /** Queries the agent asked (and that were refused). */
  queries: number;
}

/**
 * Finds the agent `target` names by discovery, prompts it and collects its reply. Several
 * instances behind one prompt subject are one agent (the queue group picks one); several subjects
 * matching is ambiguous. Queries are answered with a refusal: there is nobody to ask.
 *
 * @throws AgentNotFoundError, AmbiguousTargetError, and what {@link promptAgent} throws.
 */
export async function askProtocolAgent(
  connection: NatsConnection,
  options: AskProtocolAgentOptions,
): Promise<ProtocolAnswer> {
  const { target, signal } = options;
  const found = await discoverAgents(connection, {
    ...options.discovery,
    ...(signal === undefined ? {} : { signal }),
  });
  const agent = pickAgent(found, target);
  const collector = createTextCollector(options.maxChars ?? Number.POSITIVE_INFINITY);
  let queries = 0;
  const address = parseProtocolSubject(agent.promptSubject);
  const heartbeatSubject = address === undefined ? undefined : protocolSubjectOf("hb", address);
  const streamOptions = heartbeatSubject === undefined ? options : { ...options, heartbeatSubject };
  for await (const chunk of promptAgent(connection, agent.promptSubject, options.message, streamOptions)) {
    if (chunk.type === "response") collector.append(chunk.text);
    else if (chunk.type === "query") {
      queries++;
      if (isValidSubject(chunk.replySubject)) {
        connection.publish(chunk.replySubject, options.queryAnswer ?? QUERY_REFUSAL);
      }
    }
  }
  return { text: collector.text(), agent, queries };
}

/**
 * The one callable agent among `found` that `target` names.
 * @throws AgentNotFoundError when none matches, AmbiguousTargetError when different subjects do.
 */
export function pickAgent(
  found: readonly DiscoveredAgent[],
  target: AgentTarget,
): DiscoveredAgent & {
  promptSubject: string;
} {
  const callable = found.filter(
    (agent): agent is DiscoveredAgent & { promptSubject: string } => agent.promptSubject !== undefined,
  );
  const matching = callable.filter((agent) => matchesTarget(agent, target));
  const subjects = new Set(matching.map((agent) => agent.promptSubject));
  const first = matching[0];
  if (first === undefined) {
    throw new AgentNotFoundError(target, unique(callable.map(describeAgent)).sort());
  }
  if (subjects.size > 1) throw new AmbiguousTargetError(target, unique(matching.map(describeAgent)).sort());
  return first;
}

/**
 * Joins text up to `limit` characters, counting the rest, so a long stream costs no more memory
 * than the cap. When cut, the text ends with the tool results' marker
 * (`…[truncated: N characters, showing the first M]`) and stays within `limit` in all.
 */
export function createTextCollector(limit: number): { append(text: string): void; text(): string } {
  let kept = "";
  let total = 0;
  return {
    append(text) {
      total += text.length;
      if (kept.length < limit) kept += sliceCodePoints(text, limit - kept.length);
    },
    text() {
      if (total <= limit) return kept;
      const marker = (shown: number): string =>
        `\n…[truncated: ${total.toLocaleString("en-US")} characters, showing the first ${shown.toLocaleString("en-US")}]`;
      const shown = sliceCodePoints(kept, Math.max(0, limit - marker(limit).length));
      return shown + marker(shown.length);
    },
  };
}

function describeTarget(target: AgentTarget): string {
  const parts = (["agent", "owner", "name"] as const)
    .filter((key) => target[key] !== undefined)
    .map((key) => `${key}=${target[key]}`);
  return parts.length === 0 ? "any agent" : parts.join(" ");
}

function unique(values: readonly string[]): string[] {
  return [...new Set(values)];
}

function formatDuration(ms: number): string {
  return ms < 1_000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`;
}

function headersOf(message: Msg): Record<string, string> | undefined {
  if (message.headers === undefined) return undefined;
  const record: Record<string, string> = {};
  for (const key of message.headers.keys()) record[key] = message.headers.get(key);
  return record;
}
